"""People's own skills and the skills manifest as PostgreSQL rows: `PgPrivateSkills`.

The same semantics as the folders (`memory_core.skills.private_folders`), through
the tables of `skills_schema`. Each change is one transaction that first takes a
transaction-level advisory lock for the person (so two processes changing one
person's skills, on any machine, run one after the other and each sees what the
other committed: two creates of one name give one skill and a `SkillExistsError`),
then runs the store's guard (the erasure fence) under it, then reads, checks and
writes, and draws a new version for the person. Only promotions touch the
manifest, locking its row `FOR UPDATE` after the person: no two locks are ever
taken in the other order, so changes cannot deadlock. Changes of different
people run side by side.

Reads take no lock: a person's scan is cached with their version, which one
cheap query compares before the cache is used. A skill's `Skill.folder` (and a
problem's path) is a label under `root` (``postgresql:skills-private/<user
key>/[<category>/]<name>``); nothing is on disk. Deleted skills are always
archived, in `skill_archive`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from memory_core.errors import (
    SkillExistsError,
    SkillNotFoundError,
    SkillPathError,
    SkillSizeError,
    SkillStorageError,
)
from memory_core.fence import current_mark
from memory_core.pg.blocking import PgSyncDatabase, SyncConnection
from memory_core.pg.fence import check_erased_sync
from memory_core.skills.cache import LruCache
from memory_core.skills.folders import FolderScan, SkillProblem, candidates_in, list_dir
from memory_core.skills.format import (
    MAX_SKILL_CHARS,
    MAX_SUPPORT_FILE_BYTES,
    SKILL_FILE,
    check_text_size,
    support_path,
)
from memory_core.skills.manifest import Manifest, manifest_text, parse_manifest, read_manifest
from memory_core.skills.private import FileKind, Listing, file_order, listing_order, scan_texts
from memory_core.skills.private_folders import (
    FolderPrivateSkills,
    readable_files,
    support_files_in,
)
from memory_core.user_keys import check_user_key

ROOT = Path("postgresql:skills-private")
ARCHIVE_ROOT = Path("postgresql:skills-archive")
MANIFEST_LABEL = Path("postgresql:skills-manifest")
_LOCK_CLASS = 0x736B696C  # 'skil': the first key of every person's advisory lock


class PgPrivateSkills:
    """Every person's own skills, the archive and the manifest in one database."""

    def __init__(
        self, db: PgSyncDatabase, *, cached_people: int = 256, shared_erasures: bool = False
    ) -> None:
        """`db`: an open `PgSyncDatabase` migrated with `SKILLS_MIGRATIONS`;
        `shared_erasures`: writes also meet the database's tombstones (`memory_core.pg.fence`,
        migrated too), the erasures of every replica."""
        self._db = db
        self._shared_erasures = shared_erasures
        self.root = ROOT
        self.manifest_label = MANIFEST_LABEL
        self._scans: LruCache[str, FolderScan] = LruCache(cached_people)

    @property
    def people_cached(self) -> int:
        return len(self._scans)

    def scan(self, user_key: str) -> FolderScan:
        with self._db.connection() as conn:
            return self._scan_on(conn, user_key)

    def people(self, problems: list[SkillProblem]) -> list[str]:
        with self._db.connection() as conn:
            rows = conn.execute("SELECT user_key FROM skill_people").fetchall()
        return sorted(str(key) for (key,) in rows)

    def read(self, user_key: str, relpath: str, file_path: str | None) -> str:
        with self._db.connection() as conn:
            return _read_on(conn, user_key, relpath, file_path)

    def support_files(self, user_key: str, relpath: str) -> tuple[str, ...]:
        category, name = _split(relpath)
        with self._db.connection() as conn:
            rows = conn.execute(
                "SELECT path FROM skill_files WHERE user_key = %s AND category = %s"
                " AND name = %s AND path <> %s",
                (user_key, category, name, SKILL_FILE),
            ).fetchall()
        return tuple(sorted(str(path) for (path,) in rows))

    def manifest_key(self) -> tuple[Any, ...]:
        with self._db.connection() as conn:
            row = conn.execute("SELECT version FROM skill_manifest WHERE id = 1").fetchone()
        return (row[0] if row is not None else None,)

    def read_manifest(self) -> Manifest:
        with self._db.connection() as conn:
            return _manifest_on(conn, lock=False)

    @contextlib.contextmanager
    def writing(
        self, user_key: str | None, guard: Callable[[], None] | None = None
    ) -> Iterator[_PgWrite]:
        """One transaction under `user_key`'s advisory lock (None: no person's)."""
        with self._db.transaction() as conn:
            if user_key is not None:
                conn.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_CLASS, user_key)
                )
            if guard is not None:
                guard()
                if user_key is not None and self._shared_erasures:  # a write, not a removal
                    check_erased_sync(conn, user_key, current_mark())  # by another replica
            try:
                yield _PgWrite(self, conn)
            except OSError as exc:  # a promotion writes the shared folder
                raise SkillStorageError(f"the change could not be made on disk: {exc}") from exc

    def content_digest(self) -> str:
        listing = Listing()
        with self._db.transaction("repeatable read") as conn:  # one snapshot of all three
            files = conn.execute(
                "SELECT user_key, category, name, path, content FROM skill_files"
            ).fetchall()
            archived = conn.execute(
                "SELECT user_key, entry, path, content FROM skill_archive"
            ).fetchall()
            manifest = _manifest_on(conn, lock=False)
        for key, category, name, path, content in sorted(files, key=_file_key):
            listing.add("skill", key, f"{category}/{name}" if category else name, path, content)
        for key, entry, path, content in sorted(archived, key=_archive_key):
            listing.add("archive", key, entry, path, content)
        listing.add_manifest(manifest)
        return listing.hexdigest()

    def is_empty(self) -> bool:
        """Whether no person has skills or an archive and no manifest was written."""
        with self._db.connection() as conn:
            return _empty_on(conn)

    def import_from_folders(
        self, private_dir: Path, archive_dir: Path | None, manifest_path: Path
    ) -> dict[str, int]:
        """Copy the folders' skills, archive and manifest into these empty tables in one
        transaction; the counts copied. Files that do not read as text under the format's
        rules stay behind (the folders' `content_digest` leaves them out too)."""
        source = FolderPrivateSkills(private_dir, manifest_path, archive_dir=archive_dir)
        problems: list[SkillProblem] = []
        now = time.time()
        files: list[tuple[str, str, str, str, str, float]] = []
        skills = left = 0
        people = source.people(problems)
        for key in people:
            for category, folder in candidates_in(Path(private_dir) / key)[0]:
                skills += 1
                readable = readable_files(folder)
                left += 1 + len(support_files_in(folder)) - len(readable)
                for path, text in readable:
                    files.append((key, category or "", folder.name, path, text, now))
        archived: list[tuple[str, str, str, str, str, str, float]] = []
        for key in source.people_archived(problems):
            for entry in list_dir(Path(archive_dir or "") / key, problems):
                for path, text in readable_files(entry):
                    name = entry.name.rsplit("-", 1)[0]
                    archived.append((key, entry.name, "", name, path, text, now))
        raw = manifest_path.read_text(encoding="utf-8") if manifest_path.exists() else None
        manifest = read_manifest(manifest_path) if raw is not None else None
        with self._db.transaction() as conn:
            if not _empty_on(conn):
                raise SkillStorageError("the skills tables are not empty; nothing was copied")
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO skill_people (user_key, version)"
                    " VALUES (%s, nextval('skill_versions'))",
                    [(key,) for key in people],
                )
                cur.executemany("INSERT INTO skill_files VALUES (%s, %s, %s, %s, %s, %s)", files)
                cur.executemany(
                    "INSERT INTO skill_archive VALUES (%s, %s, %s, %s, %s, %s, %s)", archived
                )
            if manifest is not None:
                _PgWrite(self, conn).write_manifest(manifest)
        return {
            "people": len(people),
            "skills": skills,
            "files": len(files),
            "archived files": len(archived),
            "manifest": int(manifest is not None),
            "files left behind": left,
        }

    def _scan_on(self, conn: SyncConnection, user_key: str) -> FolderScan:
        key = check_user_key(user_key)
        row = conn.execute(
            "SELECT version FROM skill_people WHERE user_key = %s", (key,)
        ).fetchone()
        version = (row[0] if row is not None else None,)
        cached = self._scans.get(key)
        if cached is not None and cached.key == version:
            return cached
        rows = conn.execute(
            "SELECT p.version, f.category, f.name, f.content FROM skill_people p"
            " LEFT JOIN skill_files f ON f.user_key = p.user_key AND f.path = %s"
            " WHERE p.user_key = %s",
            (SKILL_FILE, key),
        ).fetchall()
        version = (rows[0][0] if rows else None,)  # one statement: rows and version agree
        items = [(c or None, n, t) for _, c, n, t in rows if n is not None]
        scan = scan_texts(version, self.root / key, items)
        self._scans.put(key, scan)
        return scan


class _PgWrite:
    """One change inside the transaction of `PgPrivateSkills.writing`."""

    def __init__(self, owner: PgPrivateSkills, conn: SyncConnection) -> None:
        self._owner = owner
        self._conn = conn

    def scan(self, user_key: str) -> FolderScan:
        return self._owner._scan_on(self._conn, user_key)

    def read(self, user_key: str, relpath: str, file_path: str | None) -> str:
        return _read_on(self._conn, user_key, relpath, file_path)

    def kind(self, user_key: str, relpath: str, file_path: str) -> FileKind | None:
        path = support_path(file_path).as_posix()
        category, name = _split(relpath)
        row = self._conn.execute(
            "SELECT bool_or(path = %s), bool_or(starts_with(path, %s)) FROM skill_files"
            " WHERE user_key = %s AND category = %s AND name = %s",
            (path, path + "/", user_key, category, name),
        ).fetchone()
        if row is not None and row[0]:
            return "file"
        return "folder" if row is not None and row[1] else None

    def create(self, user_key: str, name: str, category: str | None, content: str) -> Path:
        key = check_user_key(user_key)
        taken = {
            (str(c), str(n))
            for c, n in self._conn.execute(
                "SELECT DISTINCT category, name FROM skill_files WHERE user_key = %s", (key,)
            ).fetchall()
        }
        tops = {c or n for c, n in taken}  # what a folder listing of the person shows
        if name in tops:
            raise SkillExistsError(f"a folder named {name!r} is in the way; choose another name")
        if category is not None and ("", category) in taken:
            raise SkillExistsError(f"category {category!r} is the name of a skill")
        if category is not None and (category, name) in taken:
            raise SkillExistsError(f"{category}/{name} already exists; choose another name")
        self._bump(key)
        self._put(key, category or "", name, SKILL_FILE, content)
        relpath = f"{category}/{name}" if category else name
        return self._owner.root / key / relpath

    def write(self, user_key: str, relpath: str, file_path: str | None, text: str) -> None:
        category, name = _split(relpath)
        path = SKILL_FILE
        if file_path is not None and file_path != SKILL_FILE:
            pure = support_path(file_path)
            path = pure.as_posix()
            for parent in list(pure.parents)[:-2]:  # a file where a folder must be
                if self.kind(user_key, relpath, parent.as_posix()) == "file":
                    raise SkillPathError(f"file_path {file_path!r}: {parent} is a file")
        self._bump(user_key)
        self._put(user_key, category, name, path, text)

    def remove(self, user_key: str, relpath: str, file_path: str) -> None:
        category, name = _split(relpath)
        self._conn.execute(
            "DELETE FROM skill_files WHERE user_key = %s AND category = %s AND name = %s"
            " AND path = %s",
            (user_key, category, name, support_path(file_path).as_posix()),
        )
        self._bump(user_key)

    def delete(self, user_key: str, relpath: str) -> Path | None:
        category, name = _split(relpath)
        entry = f"{name}-{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}"  # as the archive folder
        self._conn.execute(
            "INSERT INTO skill_archive SELECT user_key, %s, category, name, path, content, %s"
            " FROM skill_files WHERE user_key = %s AND category = %s AND name = %s",
            (entry, time.time(), user_key, category, name),
        )
        self.drop(user_key, relpath)
        return ARCHIVE_ROOT / user_key / entry

    def texts(self, user_key: str, relpath: str) -> list[tuple[str, str]]:
        category, name = _split(relpath)
        rows = self._conn.execute(
            "SELECT path, content FROM skill_files WHERE user_key = %s AND category = %s"
            " AND name = %s",
            (user_key, category, name),
        ).fetchall()
        return sorted(((str(p), str(c)) for p, c in rows), key=lambda r: file_order(r[0]))

    def export(self, user_key: str, relpath: str, dest: Path) -> None:
        dest.mkdir()
        for path, text in self.texts(user_key, relpath):
            target = dest.joinpath(*PurePosixPath(path).parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")

    def drop(self, user_key: str, relpath: str) -> None:
        category, name = _split(relpath)
        self._conn.execute(
            "DELETE FROM skill_files WHERE user_key = %s AND category = %s AND name = %s",
            (user_key, category, name),
        )
        self._bump(user_key)

    def erase(self, user_key: str) -> int:
        key = check_user_key(user_key)
        people = self._conn.execute("DELETE FROM skill_people WHERE user_key = %s", (key,))
        archive = self._conn.execute("DELETE FROM skill_archive WHERE user_key = %s", (key,))
        return int(people.rowcount > 0) + int(archive.rowcount > 0)

    def read_manifest(self) -> Manifest:
        return _manifest_on(self._conn, lock=True)

    def write_manifest(self, manifest: Manifest) -> None:
        self._conn.execute(
            "UPDATE skill_manifest SET content = %s, version = nextval('skill_versions')"
            " WHERE id = 1",
            (manifest_text(manifest),),
        )

    def _bump(self, user_key: str) -> None:
        """A new version for the person (their row made on their first skill)."""
        self._conn.execute(
            "INSERT INTO skill_people (user_key, version) VALUES (%s, nextval('skill_versions'))"
            " ON CONFLICT (user_key) DO UPDATE SET version = EXCLUDED.version",
            (user_key,),
        )

    def _put(self, user_key: str, category: str, name: str, path: str, text: str) -> None:
        self._conn.execute(
            "INSERT INTO skill_files VALUES (%s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (user_key, category, name, path)"
            " DO UPDATE SET content = EXCLUDED.content, updated_at = EXCLUDED.updated_at",
            (user_key, category, name, path, text, time.time()),
        )


def _split(relpath: str) -> tuple[str, str]:
    """(category, or '' for none; name) of a relpath."""
    category, _, name = relpath.rpartition("/")
    return category, name


def _read_on(conn: SyncConnection, user_key: str, relpath: str, file_path: str | None) -> str:
    """The text of a file, under the read rules `read_skill_file` and `read_support_file`
    apply on disk."""
    category, name = _split(relpath)
    skill_md = file_path is None or file_path == SKILL_FILE
    path = SKILL_FILE if skill_md else support_path(file_path).as_posix()
    row = conn.execute(
        "SELECT content FROM skill_files WHERE user_key = %s AND category = %s AND name = %s"
        " AND path = %s",
        (user_key, category, name, path),
    ).fetchone()
    if row is None:
        missing = "no skill named" if skill_md else f"skill {name!r} has no file"
        raise SkillNotFoundError(f"{missing} {name if skill_md else file_path!r}")
    text = str(row[0])
    size = len(text.encode("utf-8"))
    if skill_md and size > 4 * MAX_SKILL_CHARS:
        raise SkillSizeError(f"{SKILL_FILE} is over the {MAX_SKILL_CHARS:,}-character limit")
    if not skill_md:
        if size > MAX_SUPPORT_FILE_BYTES:
            raise SkillSizeError(
                f"{file_path} is {size:,} bytes; support files are limited to "
                f"{MAX_SUPPORT_FILE_BYTES:,} bytes"
            )
        check_text_size(text, path)
    return text


def _empty_on(conn: SyncConnection) -> bool:
    row = conn.execute(
        "SELECT (SELECT count(*) FROM skill_people) + (SELECT count(*) FROM skill_archive)"
        " + (SELECT count(content) FROM skill_manifest)"
    ).fetchone()
    return row is not None and int(row[0]) == 0


def _manifest_on(conn: SyncConnection, *, lock: bool) -> Manifest:
    sql = "SELECT content FROM skill_manifest WHERE id = 1" + (" FOR UPDATE" if lock else "")
    row = conn.execute(sql).fetchone()
    if row is None or row[0] is None:
        return Manifest()
    return parse_manifest(str(row[0]), MANIFEST_LABEL)


def _file_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    key, category, name, path, _ = row
    return (key, listing_order((category or None, name)), file_order(path))


def _archive_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    key, entry, path, _ = row
    return (key, entry, file_order(path))

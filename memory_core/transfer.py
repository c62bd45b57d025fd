"""Moving a bot's storage from SQLite and files to PostgreSQL, and checking either backend.

`migrate_storage` copies a data directory into an empty PostgreSQL database, all
of it in ONE transaction (`memory_core.pg.move.PgOneTransaction`): the sessions,
messages and waiting inbox of ``state.db`` row for row (ids, timestamps, stored
prompts, review counters and extraction progress kept, so a moved bot sends the
same prompt bytes), then every other store handed to it as a `StorePart`
(memory with its settings and staged changes, private skills with their
manifest, the shared documents), each through its own ``import_from`` writing
into that transaction. It refuses a target that holds anything before writing a
row, never writes to the source (state.db is read through
`memory_core.sessions.dump.open_readonly`, the memory files only read), and
verifies the copy before it commits: the row counts and a content digest of each
store, taken on both sides the same way (`session_digest` for the sessions;
each store's ``content_digest`` for the others). A difference, an error or a
killed process commits nothing: the target holds its (empty) schema only, and
the move can simply be run again.

Text PostgreSQL cannot hold (NUL, a lone surrogate) is stored as its live writes
store it (`memory_core.pg.session_writes.clean`: U+FFFD in its place), and the
source side of each digest is taken over the text so mapped; the report counts
the texts that were (`PartReport.mapped`).

`check_storage_sqlite` and `check_storage_pg` look over one backend and return
a `CheckReport`: on SQLite the database's integrity, both full-text indexes
and the message counts; on PostgreSQL the recorded schema against this code's
migrations, the message counts, owner tokens, and every message's (or a
sample's) `words` and `symbols` against what its content gives; on both, each
store's digest can be read.

`migrate_data_dir` and `check_data_dir` are the whole of it for one data
directory, as ``mnemo storage migrate|check`` use them: the memory files and
the private skills folders as the parts (`memory_part`, `skills_part`), every
PostgreSQL store's schema created on the target first (committed on its own:
an empty schema is what a failed move leaves); the check changes nothing, not
even a migration.

This module is backend-neutral: it imports neither sqlite3 nor psycopg, only
the store modules that do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from memory_core.documents import Document, file_documents
from memory_core.errors import (
    MemoryCoreError,
    PostgresError,
    PostgresSchemaError,
    SessionStoreBusyError,
    SessionStoreError,
)
from memory_core.fence import ErasureFence
from memory_core.file_memory import FileMemoryStore
from memory_core.file_memory.digest import Readable
from memory_core.pg import session_rows
from memory_core.pg.blocking import PgSyncDatabase, SyncConnection
from memory_core.pg.database import PgDatabase
from memory_core.pg.documents import pg_documents
from memory_core.pg.memory import PgMemoryStore
from memory_core.pg.migrations import PgMigration, check_recorded, plan
from memory_core.pg.move import HeldMemory, HeldText, PgOneTransaction, after_copy
from memory_core.pg.session_import import IMPORT_LOCK
from memory_core.pg.session_writes import clean
from memory_core.pg.sessions_schema import SESSION_MIGRATIONS
from memory_core.pg.skills import PgPrivateSkills
from memory_core.pg.stores import ALL_MIGRATIONS, probe
from memory_core.sessions import dump
from memory_core.skills.private_folders import FolderPrivateSkills
from memory_core.storage import StorageSettings

__all__ = [
    "CheckReport",
    "MigrationReport",
    "PartReport",
    "StorePart",
    "check_data_dir",
    "check_storage_pg",
    "check_storage_sqlite",
    "memory_part",
    "migrate_data_dir",
    "migrate_storage",
    "session_digest",
    "skills_part",
]

STATE_DB = "state.db"
Row = Sequence[Any]


@dataclass(frozen=True)
class StorePart:
    """A store a move copies besides the sessions, as four plain calls (run on a thread).

    `target_empty` says whether the target holds nothing yet; `copy` copies the
    source into it and returns counts by kind; the digests are sha256 hex of
    everything each side holds, equal exactly when they hold the same. `mapped`
    says, once the copy ran, how many of its texts were mapped to be held (NUL).
    """

    name: str
    target_empty: Callable[[], bool]
    copy: Callable[[], Mapping[str, int]]
    source_digest: Callable[[], str]
    target_digest: Callable[[], str]
    mapped: Callable[[], int] = lambda: 0


@dataclass(frozen=True)
class PartReport:
    """One store's copy: its counts on each side, its digests, and how many of its texts
    held what PostgreSQL cannot (NUL) and were stored with U+FFFD in its place."""

    name: str
    source_counts: Mapping[str, int]
    target_counts: Mapping[str, int]
    source_digest: str
    target_digest: str
    mapped: int = 0

    @property
    def ok(self) -> bool:
        return self.source_digest == self.target_digest and dict(self.source_counts) == dict(
            self.target_counts
        )


@dataclass(frozen=True)
class MigrationReport:
    """What a move copied, store by store; `ok` when every count and digest agrees,
    and only then was it committed (`kept`): otherwise the target holds none of it."""

    parts: tuple[PartReport, ...]

    @property
    def ok(self) -> bool:
        return all(part.ok for part in self.parts)

    @property
    def kept(self) -> bool:
        return self.ok

    @property
    def mapped(self) -> int:
        return sum(part.mapped for part in self.parts)


@dataclass
class CheckReport:
    """What a check looked at (`passed`) and what it found wrong (`problems`)."""

    backend: str
    passed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


class _Digest:
    """sha256 over (table, row) lines; a row's values as JSON (floats round-trip by repr)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def add(self, table: str, row: Row) -> None:
        self._hash.update(json.dumps([table, *row]).encode("ascii"))
        self._hash.update(b"\n")

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def session_digest(rows: Iterable[tuple[str, Row]]) -> str:
    """The digest of a session store's canonical listing: (table, row) pairs in table,
    then id order, each row in `dump.COLUMNS` order (both backends list them so)."""
    digest = _Digest()
    for table, row in rows:
        digest.add(table, row)
    return digest.hexdigest()


async def _pg_session_digest(db: PgDatabase) -> str:
    digest = _Digest()
    async for table, row in session_rows.table_rows(db):
        digest.add(table, row)
    return digest.hexdigest()


def _sqlite_rows(conn: Any, mapping: HeldText) -> Iterator[tuple[str, Row]]:
    for table in session_rows.TABLES:
        for row in dump.table_rows(conn, table):
            yield table, mapping.row(row)


class _MemoryTarget(Protocol):
    def content_digest(self) -> str: ...

    def user_keys(self) -> list[str]: ...

    def import_from(self, files: Any) -> dict[str, int]: ...

    def history(self, target: Any, user_key: str | None = None, limit: int | None = 20) -> Any: ...

    def read(self, target: Any, user_key: str | None = None) -> Any: ...


def memory_part(files: Readable, target: _MemoryTarget) -> StorePart:
    """The memory (MEMORY.md, every USER.md with its ledger and archive, the records that
    hold settings and staged changes) as a part: `target.import_from(files)`, every
    text as PostgreSQL holds it (a NUL becomes U+FFFD), and the source's digest so too."""
    mapping = HeldText()
    source = HeldMemory(files, mapping)
    mapped: list[int] = []

    def empty() -> bool:
        return not (target.user_keys() or target.read("memory").entries or target.history("memory"))

    def copy() -> dict[str, int]:
        counts = target.import_from(source)
        mapped.append(mapping.changed)  # the copy reads every text once; digests read again
        return counts

    return StorePart("memory", empty, copy, source.content_digest, target.content_digest,
                     lambda: sum(mapped))  # fmt: skip


class _SkillsTarget(Protocol):
    def is_empty(self) -> bool: ...

    def content_digest(self) -> str: ...

    def import_from_folders(
        self, private_dir: Path, archive_dir: Path | None, manifest_path: Path
    ) -> dict[str, int]: ...


def skills_part(folders: FolderPrivateSkills, target: _SkillsTarget) -> StorePart:
    """People's own skills, their archive and the skills manifest as a part:
    `target.import_from_folders` of the folders'."""

    def copy() -> dict[str, int]:
        return target.import_from_folders(folders.root, folders.archive_dir, folders.manifest_label)

    return StorePart("skills", target.is_empty, copy, folders.content_digest, target.content_digest)


SHARED_DOCUMENTS = ("access.json",)  # the people let in without a restart, and their codes


def documents_part(
    source: Callable[[str], Document], target: Callable[[str], Document]
) -> StorePart:
    """The bot's shared documents (the access list) as a part: each one the source
    holds, written whole into the target's (as PostgreSQL holds text: NUL as U+FFFD)."""
    mapped: list[int] = []

    def held(documents: Callable[[str], Document]) -> list[tuple[str, str]]:
        found = ((name, documents(name).read()) for name in SHARED_DOCUMENTS)
        return [(name, clean(text)) for name, text in found if text is not None]

    def copy() -> dict[str, int]:
        found = ((name, source(name).read()) for name in SHARED_DOCUMENTS)
        texts = [(name, text) for name, text in found if text is not None]
        mapped.append(sum(clean(text) != text for _, text in texts))
        for name, text in texts:
            with target(name).changing() as handle:
                handle.write(clean(text))
        return {"documents": len(texts)}

    def digest(documents: Callable[[str], Document]) -> Callable[[], str]:
        return lambda: hashlib.sha256(
            json.dumps(held(documents), ensure_ascii=False).encode("utf-8")
        ).hexdigest()

    return StorePart("documents", lambda: not held(target), copy, digest(source), digest(target),
                     lambda: sum(mapped))  # fmt: skip


def migrate_storage(
    source_home: Path,
    target: PgSyncDatabase,
    parts: Callable[[PgSyncDatabase], Sequence[StorePart]] = lambda _db: (),
    *,
    echo: Callable[[str], None] | None = None,
) -> MigrationReport:
    """Copy `source_home`'s state.db and the stores `parts(db)` makes into the empty
    `target`, in one transaction; verify; commit only if every store agrees; the report.

    `target` is open; the sessions schema is migrated here (committed apart) if it
    is not yet. `parts` is given the move's transaction as a database, and makes
    each store over it. Refuses (`PostgresError`, nothing written) a target holding
    any session, message, queued message or part; another move or import running
    into it raises `SessionStoreBusyError`. The report says, store by store,
    whether the counts and digests agree; when one does not (`ok` false) nothing
    was committed. A part's counts are what its own import wrote; its digests are
    the check. `echo` is given one line per store once the move is committed.
    """
    say = echo or (lambda _line: None)
    target.migrate(SESSION_MIGRATIONS)
    try:
        with target.transaction() as conn:
            report = _move(Path(source_home), conn, parts(PgOneTransaction(conn)))
            if not report.ok:
                raise _Differs(report)
    except _Differs as differs:
        report = differs.report  # rolled back: the target holds nothing of it
    for part in report.parts:
        say(_line(part))
    return report


class _Differs(Exception):
    """A copy that differs from its source: raised to roll the move's transaction back."""

    def __init__(self, report: MigrationReport) -> None:
        super().__init__("the copy differs from its source")
        self.report = report


def _move(source_home: Path, conn: SyncConnection, parts: Sequence[StorePart]) -> MigrationReport:
    """The move inside its transaction: refuse a target holding anything, copy everything,
    then take every digest (the target's within the transaction, before it commits)."""
    locked = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (IMPORT_LOCK,)).fetchone()
    if not (locked and locked[0]):
        raise SessionStoreBusyError("another move or import into this database is running")
    held = {t: n for t, n in session_rows.counts_on(conn).items() if n}
    held |= {p.name: 1 for p in parts if not p.target_empty()}
    if held:
        raise PostgresError(
            f"the target database already holds {', '.join(sorted(held))}: "
            "a move goes only into an empty database"
        )
    path = source_home / STATE_DB
    stamp = _stamp(path)
    source = dump.open_readonly(path) if path.exists() else None  # none: no message yet
    try:
        mapping = HeldText()
        if source is not None:
            session_rows.copy_rows(conn, _sqlite_rows(source, mapping))
            after_copy(conn)
        mapped = mapping.changed
        copied = [dict(part.copy()) for part in parts]
        reports = [_sessions_report(source, conn, mapping, mapped)]
    finally:
        if source is not None:
            source.close()
    for part, counts in zip(parts, copied, strict=True):
        # the store's own import counted what it wrote: the digests are the check
        reports.append(PartReport(part.name, counts, counts, part.source_digest(),
                                  part.target_digest(), part.mapped()))  # fmt: skip
    if _stamp(path) != stamp:
        raise SessionStoreError(
            f"{path} changed while it was copied: stop whatever writes it and move again"
        )
    return MigrationReport(tuple(reports))


def _stamp(path: Path) -> tuple[object, ...]:
    """What tells that state.db was written: its size and time, and its -wal's. A state.db
    without a -wal is read ``immutable`` (``mode=ro`` would create -wal and -shm beside
    it), which sees no writer: one that wrote meanwhile shows here, and the move rolls back."""
    found: list[tuple[int, int] | None] = []
    for file in (path, path.with_name(f"{path.name}-wal")):
        try:
            st = os.stat(file)
        except FileNotFoundError:
            found.append(None)
        else:
            found.append((st.st_size, st.st_mtime_ns))
    return tuple(found)


def _sessions_report(
    source: Any, conn: SyncConnection, mapping: HeldText, mapped: int
) -> PartReport:
    """The sessions' counts and digests: state.db's (`source`, its text mapped as it was
    copied; None: no state.db) and the target's, read inside the move's transaction."""
    if source is None:
        counts, digest = dict.fromkeys(session_rows.TABLES, 0), session_digest(())
    else:
        counts = {t: dump.row_count(source, t) for t in session_rows.TABLES}
        digest = session_digest(_sqlite_rows(source, mapping))
    target_digest = session_digest(session_rows.rows_on(conn))
    return PartReport("sessions", counts, session_rows.counts_on(conn), digest, target_digest,
                      mapped)  # fmt: skip


def _line(report: PartReport) -> str:
    counts = ", ".join(f"{n} {kind}" for kind, n in report.target_counts.items())
    state = "ok  " if report.ok else "DIFF"
    texts = f"{report.mapped} text{'s' if report.mapped != 1 else ''}"
    mapped = f"; {texts} with NUL stored as U+FFFD" if report.mapped else ""
    return (
        f"{state} {report.name}: {counts or 'nothing'}{mapped} (sha256 {report.target_digest[:16]})"
    )


async def check_storage_sqlite(
    home: Path, digests: Mapping[str, Callable[[], str]] | None = None
) -> CheckReport:
    """Look over a SQLite data directory: state.db's integrity, indexes and counts;
    each of `digests` (store name -> its `content_digest`) readable."""
    report = CheckReport("sqlite")
    path = Path(home) / STATE_DB
    if path.exists():
        try:
            await asyncio.to_thread(dump.check_source, path, report.passed.append)
        except MemoryCoreError as exc:
            report.problems.append(str(exc))
    else:
        report.passed.append(f"no {STATE_DB} yet")
    await _read_digests(report, digests or {})
    return report


async def check_storage_pg(
    db: PgDatabase,
    steps: Sequence[PgMigration],
    digests: Mapping[str, Callable[[], str]] | None = None,
    *,
    sample: int | None = None,
) -> CheckReport:
    """Look over a PostgreSQL database: its recorded schema is `steps` (every store's
    migrations), the session rows are sound (`session_rows.check_rows`, all messages
    or a `sample`), each of `digests` readable."""
    report = CheckReport("postgresql")
    recorded = await _recorded(db)
    for component, listed in plan(steps).items():
        have = recorded.get(component, {})
        try:
            check_recorded(component, listed, have)
        except PostgresSchemaError as exc:
            report.problems.append(str(exc))
            continue
        missing = [s.version for s in listed if s.version not in have]
        if missing:
            report.problems.append(f"{component} schema lacks versions {missing}: run mnemo once")
        else:
            report.passed.append(f"schema {component} v{listed[-1].version}")
    if "sessions" in recorded:
        for what, wrong in (await session_rows.check_rows(db, sample=sample)).items():
            (report.problems if wrong else report.passed).append(
                f"{wrong} rows with wrong {what}" if wrong else what
            )
        report.digests["sessions"] = await _pg_session_digest(db)
    await _read_digests(report, digests or {})
    return report


async def _recorded(db: PgDatabase) -> dict[str, dict[int, str]]:
    found: dict[str, dict[int, str]] = {}
    for component, version, sha256 in await session_rows.schema_records(db):
        found.setdefault(component, {})[version] = sha256
    return found


async def _read_digests(report: CheckReport, digests: Mapping[str, Callable[[], str]]) -> None:
    for name, digest in digests.items():
        try:
            report.digests[name] = await asyncio.to_thread(digest)
        except MemoryCoreError as exc:
            report.problems.append(f"{name}: {exc}")
        else:
            report.passed.append(f"{name} readable")


# A whole data directory, as `mnemo storage migrate|check` see it. The folder names
# are the ones `memory_core.storage.open_storage` lays out under home.
PRIVATE_SKILLS = "skills-private"
SKILLS_MANIFEST = "skills-manifest.json"
SKILLS_ARCHIVE = "skills-archive"


def _folder_stores(settings: StorageSettings) -> tuple[FileMemoryStore, FolderPrivateSkills]:
    """The data directory's memory files and private skills folders, to read."""
    home = settings.home
    files = FileMemoryStore(
        home,
        memory_char_limit=settings.memory_char_limit,
        user_char_limit=settings.user_char_limit,
    )
    skills = FolderPrivateSkills(
        home / PRIVATE_SKILLS, home / SKILLS_MANIFEST, archive_dir=home / SKILLS_ARCHIVE
    )
    return files, skills


def migrate_data_dir(
    settings: StorageSettings, url: str, *, echo: Callable[[str], None] | None = None
) -> MigrationReport:
    """Copy the SQLite data directory `settings.home` (sessions, memory with its settings
    and staged changes, private skills with their archive and the manifest, the shared
    documents) into the empty PostgreSQL database at `url`, whose every store's schema
    is created first; the report of `migrate_storage`: one transaction, committed only
    when verified, refused on a target holding anything."""
    files, skills = _folder_stores(settings)
    probe(url, 10.0)  # a refused connection is one line, not the pool's retries

    def parts(db: PgSyncDatabase) -> list[StorePart]:
        memory = PgMemoryStore(
            db,
            memory_char_limit=settings.memory_char_limit,
            user_char_limit=settings.user_char_limit,
            fence=ErasureFence(),
        )
        return [
            memory_part(files, memory),
            skills_part(skills, PgPrivateSkills(db)),
            documents_part(file_documents(settings.home), pg_documents(db)),
        ]

    with PgSyncDatabase(url, max_size=1) as target:
        target.migrate(ALL_MIGRATIONS)
        return migrate_storage(settings.home, target, parts, echo=echo)


async def check_data_dir(settings: StorageSettings, *, sample: int | None = None) -> CheckReport:
    """Look over the backend `settings` names, changing nothing (no migration runs):
    `check_storage_sqlite` or `check_storage_pg` with the digests of memory and private
    skills (on PostgreSQL, of those whose schema is there)."""
    if settings.url is None:
        files, skills = _folder_stores(settings)
        return await check_storage_sqlite(
            settings.home, {"memory": files.content_digest, "skills": skills.content_digest}
        )
    async with PgDatabase(settings.url, max_size=2) as db:
        recorded = {component for component, _, _ in await session_rows.schema_records(db)}
        with PgSyncDatabase(settings.url, max_size=2) as blocking:
            memory = PgMemoryStore(blocking)
            digests = {"memory": memory.content_digest}
            digests["skills"] = PgPrivateSkills(blocking).content_digest
            digests = {name: d for name, d in digests.items() if name in recorded}
            return await check_storage_pg(db, ALL_MIGRATIONS, digests, sample=sample)

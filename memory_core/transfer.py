"""Moving a bot's storage from SQLite and files to PostgreSQL, and checking either backend.

`migrate_storage` copies a data directory into an empty PostgreSQL database:
the sessions, messages and waiting inbox of ``state.db`` row for row (ids,
timestamps, stored prompts, review counters and extraction progress kept, so
a moved bot sends the same prompt bytes), then every other store handed to it
as a `StorePart` (memory with its settings and staged changes, private skills
with their manifest), each through its own ``import_from``. It refuses a
target that holds anything before writing a row, never writes to the source
(state.db is read through `memory_core.sessions.dump.open_readonly`), and
verifies the copy: the row counts and a content digest of each store, taken
on both sides the same way (`session_digest` for the sessions; each store's
``content_digest`` for the others).

`check_storage_sqlite` and `check_storage_pg` look over one backend and return
a `CheckReport`: on SQLite the database's integrity, both full-text indexes
and the message counts; on PostgreSQL the recorded schema against this code's
migrations, the message counts, owner tokens, and every message's (or a
sample's) `words` and `symbols` against what its content gives; on both, each
store's digest can be read.

`migrate_data_dir` and `check_data_dir` are the whole of it for one data
directory, as ``mnemo storage migrate|check`` use them: the memory files and
the private skills folders as the parts (`memory_part`, `skills_part`), every
PostgreSQL store's schema created on the target first; the check changes
nothing, not even a migration.

This module is backend-neutral: it imports neither sqlite3 nor psycopg, only
the store modules that do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from memory_core.documents import Document, file_documents
from memory_core.errors import MemoryCoreError, PostgresError, PostgresSchemaError
from memory_core.fence import ErasureFence
from memory_core.file_memory import FileMemoryStore
from memory_core.pg import session_rows
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.database import PgDatabase
from memory_core.pg.documents import pg_documents
from memory_core.pg.memory import PgMemoryStore
from memory_core.pg.migrations import PgMigration, check_recorded, plan
from memory_core.pg.sessions_schema import SESSION_MIGRATIONS
from memory_core.pg.skills import PgPrivateSkills
from memory_core.pg.stores import ALL_MIGRATIONS, open_postgres_stores
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
    everything each side holds, equal exactly when they hold the same.
    """

    name: str
    target_empty: Callable[[], bool]
    copy: Callable[[], Mapping[str, int]]
    source_digest: Callable[[], str]
    target_digest: Callable[[], str]


@dataclass(frozen=True)
class PartReport:
    """One store's copy: its counts on each side and its digests."""

    name: str
    source_counts: Mapping[str, int]
    target_counts: Mapping[str, int]
    source_digest: str
    target_digest: str

    @property
    def ok(self) -> bool:
        return self.source_digest == self.target_digest and dict(self.source_counts) == dict(
            self.target_counts
        )


@dataclass(frozen=True)
class MigrationReport:
    """What a move copied, store by store; `ok` when every count and digest agrees."""

    parts: tuple[PartReport, ...]

    @property
    def ok(self) -> bool:
        return all(part.ok for part in self.parts)


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


def _sqlite_rows(conn: Any) -> Iterator[tuple[str, Row]]:
    for table in session_rows.TABLES:
        for row in dump.table_rows(conn, table):
            yield table, row


class _MemorySource(Protocol):
    def content_digest(self) -> str: ...


class _MemoryTarget(Protocol):
    def content_digest(self) -> str: ...

    def user_keys(self) -> list[str]: ...

    def import_from(self, files: Any) -> dict[str, int]: ...

    def history(self, target: Any, user_key: str | None = None, limit: int | None = 20) -> Any: ...

    def read(self, target: Any, user_key: str | None = None) -> Any: ...


def memory_part(files: _MemorySource, target: _MemoryTarget) -> StorePart:
    """The memory (MEMORY.md, every USER.md with its ledger and archive, the records that
    hold settings and staged changes) as a part: `target.import_from(files)`."""

    def empty() -> bool:
        return not (target.user_keys() or target.read("memory").entries or target.history("memory"))

    return StorePart("memory", empty, lambda: target.import_from(files),
                     files.content_digest, target.content_digest)  # fmt: skip


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
    holds, written whole into the target's."""

    def held(documents: Callable[[str], Document]) -> list[tuple[str, str]]:
        found = ((name, documents(name).read()) for name in SHARED_DOCUMENTS)
        return [(name, text) for name, text in found if text is not None]

    def copy() -> dict[str, int]:
        texts = held(source)
        for name, text in texts:
            with target(name).changing() as handle:
                handle.write(text)
        return {"documents": len(texts)}

    def digest(documents: Callable[[str], Document]) -> Callable[[], str]:
        return lambda: hashlib.sha256(
            json.dumps(held(documents), ensure_ascii=False).encode("utf-8")
        ).hexdigest()

    return StorePart("documents", lambda: not held(target), copy, digest(source), digest(target))


async def _session_counts_pg(db: PgDatabase) -> dict[str, int]:
    return {table: await session_rows.row_count(db, table) for table in session_rows.TABLES}


async def migrate_storage(
    source_home: Path,
    target: PgDatabase,
    parts: Sequence[StorePart] = (),
    *,
    echo: Callable[[str], None] | None = None,
) -> MigrationReport:
    """Copy `source_home`'s state.db and `parts` into the empty `target`; verify; the report.

    `target` is open; the sessions schema is migrated here if it is not yet.
    Refuses (`PostgresError`, nothing written) a target holding any session,
    message, queued message or part. The report says, store by store, whether
    the counts and digests agree (`ok`); the caller reports a difference. A
    part's counts are what its own import wrote; its digests are the check.
    """
    say = echo or (lambda _line: None)
    await target.migrate(SESSION_MIGRATIONS)
    held = {t: n for t, n in (await _session_counts_pg(target)).items() if n}
    held |= {p.name: 1 for p in parts if not await asyncio.to_thread(p.target_empty)}
    if held:
        raise PostgresError(
            f"the target database already holds {', '.join(sorted(held))}: "
            "a move goes only into an empty database"
        )
    reports = [await _move_sessions(Path(source_home) / STATE_DB, target)]
    say(_line(reports[0]))
    for part in parts:
        counts = dict(await asyncio.to_thread(part.copy))
        report = PartReport(
            part.name,
            counts,
            counts,  # the store's own import counted what it wrote
            await asyncio.to_thread(part.source_digest),
            await asyncio.to_thread(part.target_digest),
        )
        reports.append(report)
        say(_line(report))
    return MigrationReport(tuple(reports))


async def _move_sessions(path: Path, target: PgDatabase) -> PartReport:
    if not path.exists():  # a bot that never stored a message
        empty = session_digest(())
        counts = dict.fromkeys(session_rows.TABLES, 0)
        return PartReport("sessions", counts, await _session_counts_pg(target), empty,
                          await _pg_session_digest(target))  # fmt: skip
    conn = dump.open_readonly(path)
    try:
        source_counts = {t: dump.row_count(conn, t) for t in session_rows.TABLES}
        await session_rows.copy_rows(target, _sqlite_rows(conn))
        source_digest = session_digest(_sqlite_rows(conn))
    finally:
        conn.close()
    return PartReport(
        "sessions",
        source_counts,
        await _session_counts_pg(target),
        source_digest,
        await _pg_session_digest(target),
    )


def _line(report: PartReport) -> str:
    counts = ", ".join(f"{n} {kind}" for kind, n in report.target_counts.items())
    state = "ok  " if report.ok else "DIFF"
    return f"{state} {report.name}: {counts or 'nothing'} (sha256 {report.target_digest[:16]})"


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


async def migrate_data_dir(
    settings: StorageSettings, url: str, *, echo: Callable[[str], None] | None = None
) -> MigrationReport:
    """Copy the SQLite data directory `settings.home` (sessions, memory with its settings
    and staged changes, private skills with their archive and the manifest) into the
    empty PostgreSQL database at `url`, whose every store's schema is created first;
    the report of `migrate_storage`, which refuses a target holding anything."""
    files, skills = _folder_stores(settings)
    async with AsyncExitStack() as stack:
        stores = await open_postgres_stores(
            url,
            ErasureFence(),
            stack,
            memory_char_limit=settings.memory_char_limit,
            user_char_limit=settings.user_char_limit,
            pool_size=2,
        )
        parts = [
            memory_part(files, stores.memory),
            skills_part(skills, stores.private_skills),
            documents_part(file_documents(settings.home), pg_documents(stores.blocking)),
        ]
        return await migrate_storage(settings.home, stores.database, parts, echo=echo)


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

"""Opening every store on the backend the operator chose: the one place that knows which.

`open_storage(where)` yields a `Storage` whose session, memory and skills stores
are either today's embedded default (SQLite ``state.db`` and files under the data
directory) or, when `where.url` is a ``postgresql://`` URL, PostgreSQL: sessions
through an async pool, memory, settings, staged changes and private skills through
a blocking pool (their callers are blocking), every component's migrations run
once at the start, under the migration lock. Shared operator skills stay the
mounted folder on both. The stores share one erasure fence, so an erasure fences
them all at once.

Nothing else in Mnemo names a backend: the gateway and the CLI take the
protocols (`SessionBackend`, `MemoryBackend`) and a `SkillsStore`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from memory_core.documents import Document, file_documents
from memory_core.fence import ErasureFence
from memory_core.file_memory import FileMemoryStore
from memory_core.file_memory.backend import MemoryBackend
from memory_core.sessions import SessionStore, sqlite_problem
from memory_core.sessions.backend import SessionBackend
from memory_core.sessions.jobs import InProcessJobs, JobQueue
from memory_core.sessions.locks import LocalSessionLocks, SessionLocks
from memory_core.skills import PrivateSkills, SkillsStore

Backend = Literal["sqlite", "postgresql"]
CONNECT_TIMEOUT = 10.0  # seconds `open_document` waits for PostgreSQL


@dataclass(frozen=True)
class StorageSettings:
    """Where the stores live and the memory budgets they enforce."""

    home: Path
    skills_dir: Path
    url: str | None = None  # None: SQLite and files under `home`
    memory_char_limit: int = 2200
    user_char_limit: int = 1375
    pool_size: int = 8

    @property
    def backend(self) -> Backend:
        return "sqlite" if self.url is None else "postgresql"


@dataclass(frozen=True)
class Storage:
    """The open stores, sharing one erasure fence."""

    backend: Backend
    sessions: SessionBackend
    memory: MemoryBackend
    skills: SkillsStore
    fence: ErasureFence
    document: Callable[[str], Document]
    """The small shared document `name` (the access list): a file under home (SQLite),
    or a row every replica reads and changes (PostgreSQL)."""
    locks: SessionLocks = field(default_factory=LocalSessionLocks)
    """One turn at a time per session: in this process (SQLite), or across every
    replica (PostgreSQL advisory locks)."""
    jobs: JobQueue = field(default_factory=InProcessJobs)
    """The background jobs' queue: in this process (SQLite: state.db says what is due
    after a restart), or a table every replica claims from (PostgreSQL)."""


def describe_storage(settings: StorageSettings) -> str:
    """Where the state is, for a log line (never a password): the data directory, or
    ``PostgreSQL database mnemo on db.internal:5432``."""
    if settings.url is None:
        return str(settings.home.resolve())
    parts = urlsplit(settings.url)
    host = parts.hostname or "the local socket"
    port = f":{parts.port}" if parts.port else ""
    return f"PostgreSQL database {parts.path.lstrip('/') or '(default)'} on {host}{port}"


@asynccontextmanager
async def open_storage(settings: StorageSettings) -> AsyncIterator[Storage]:
    """Open (creating or migrating) every store; close them on the way out."""
    fence = ErasureFence()
    locks: SessionLocks = LocalSessionLocks()
    jobs: JobQueue = InProcessJobs()
    async with AsyncExitStack() as stack:
        if settings.url is None:
            settings.home.mkdir(parents=True, exist_ok=True)
            sessions: SessionBackend = SessionStore(settings.home / "state.db", fence=fence)
            await sessions.open()
            stack.push_async_callback(sessions.close)
            memory: MemoryBackend = FileMemoryStore(
                settings.home,
                memory_char_limit=settings.memory_char_limit,
                user_char_limit=settings.user_char_limit,
                fence=fence,
            )
            skills = _skills(settings, fence)
            document = file_documents(settings.home)
        else:
            # imported here: the embedded default never loads psycopg
            from memory_core.pg.documents import pg_documents
            from memory_core.pg.stores import open_postgres_stores

            stores = await open_postgres_stores(
                settings.url,
                fence,
                stack,
                memory_char_limit=settings.memory_char_limit,
                user_char_limit=settings.user_char_limit,
                pool_size=settings.pool_size,
            )
            sessions, memory, locks = stores.sessions, stores.memory, stores.locks
            jobs = stores.jobs
            skills = _skills(settings, fence, stores.private_skills)
            document = pg_documents(stores.blocking)
        yield Storage(settings.backend, sessions, memory, skills, fence, document, locks, jobs)


@contextmanager
def open_document(settings: StorageSettings, name: str) -> Iterator[Document]:
    """The shared document `name` alone, for a command that needs nothing else (`mnemo
    users`): ``home/NAME`` (SQLite: nothing else is opened), or its row over a
    connection of its own (PostgreSQL, migrated as `open_storage` does)."""
    if settings.url is None:
        yield file_documents(settings.home)(name)
        return
    from memory_core.pg.blocking import PgSyncDatabase
    from memory_core.pg.documents import PgDocument
    from memory_core.pg.stores import ALL_MIGRATIONS, probe

    probe(settings.url, CONNECT_TIMEOUT)  # a refusal in one line, at once
    with PgSyncDatabase(settings.url, max_size=1, connect_timeout=CONNECT_TIMEOUT) as db:
        db.migrate(ALL_MIGRATIONS)
        yield PgDocument(db, name)


def _skills(
    settings: StorageSettings, fence: ErasureFence, private: PrivateSkills | None = None
) -> SkillsStore:
    home = settings.home
    return SkillsStore(
        settings.skills_dir,
        home / "skills-manifest.json",
        private_dir=home / "skills-private",
        archive_dir=home / "skills-archive",
        fence=fence,
        private=private,
    )


def storage_problem(settings: StorageSettings) -> tuple[str, str | None]:
    """(what the backend is, what keeps the bot from using it or None), changing nothing:
    SQLite's FTS5 and trigram tokenizer, or the PostgreSQL server, pg_trgm and the
    recorded schema (`PostgresUnavailableError` when it cannot be reached)."""
    if settings.url is None:
        version, problem = sqlite_problem()
        return (
            f"SQLite {version} with FTS5 and trigram",
            problem and f"SQLite {version} has {problem}",
        )
    from memory_core.pg.stores import postgres_problem

    return postgres_problem(settings.url)

"""Every store on one PostgreSQL database: the pools, the migrations, the stores.

`open_postgres_stores` opens two pools on the URL, an async one for the session
store and a blocking one for memory, settings, staged changes and private skills
(whose callers block), runs every component's migrations once (under the
migration lock, so replicas starting together migrate once), and registers the
pools' closing on `stack`. It also sets this process's erasure marks to the
server's clock, and keeps them so (`memory_core.pg.fence`).
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass

import psycopg

from memory_core.errors import PostgresSchemaError, PostgresUnavailableError
from memory_core.fence import PROCESS_MARKS, ErasureFence
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.database import PgDatabase
from memory_core.pg.documents import DOCUMENT_MIGRATIONS
from memory_core.pg.fence import FENCE_MIGRATIONS, PgTombstones, calibrate, keep_calibrated
from memory_core.pg.memory import PgMemoryStore
from memory_core.pg.memory_schema import MEMORY_MIGRATIONS
from memory_core.pg.migrations import PgMigration, check_recorded, plan
from memory_core.pg.session_jobs import JOB_MIGRATIONS, PgJobQueue
from memory_core.pg.session_locks import PgSessionLocks
from memory_core.pg.sessions import PgSessionStore
from memory_core.pg.sessions_schema import SESSION_MIGRATIONS
from memory_core.pg.skills import PgPrivateSkills
from memory_core.pg.skills_schema import SKILLS_MIGRATIONS

ALL_MIGRATIONS: tuple[PgMigration, ...] = (
    *SESSION_MIGRATIONS,
    *MEMORY_MIGRATIONS,
    *SKILLS_MIGRATIONS,
    *JOB_MIGRATIONS,
    *FENCE_MIGRATIONS,
    *DOCUMENT_MIGRATIONS,
)


@dataclass(frozen=True)
class PgStores:
    """The stores on one database, and the pools they share."""

    database: PgDatabase
    blocking: PgSyncDatabase
    sessions: PgSessionStore
    memory: PgMemoryStore
    private_skills: PgPrivateSkills
    locks: PgSessionLocks  # one turn at a time per session across replicas

    @property
    def jobs(self) -> PgJobQueue:
        """The background jobs every replica claims from (on the async pool)."""
        return PgJobQueue(self.database)


async def open_postgres_stores(
    url: str,
    fence: ErasureFence,
    stack: AsyncExitStack,
    *,
    memory_char_limit: int,
    user_char_limit: int,
    pool_size: int = 8,
    connect_timeout: float = 10.0,
) -> PgStores:
    """Open, migrate and build every store on `url`; `stack` closes the pools.

    One plain connection is tried first, so that a server that refuses or a wrong
    password is one line at once (`PostgresUnavailableError`), not the pool's half
    minute of retries and warnings."""
    await asyncio.to_thread(probe, url, connect_timeout)
    database = PgDatabase(url, max_size=pool_size)
    await database.open()
    stack.push_async_callback(database.close)
    await database.migrate(ALL_MIGRATIONS)
    await calibrate(database, PROCESS_MARKS)  # marks in the server's time, as tombstones are
    calibrating = asyncio.create_task(keep_calibrated(database, PROCESS_MARKS))
    stack.callback(calibrating.cancel)
    blocking = PgSyncDatabase(url, max_size=pool_size)
    blocking.open()
    stack.callback(blocking.close)
    fence.remote = PgTombstones(blocking)  # an erasure here fences every replica
    sessions = PgSessionStore(database, fence=fence)
    await sessions.open()
    stack.push_async_callback(sessions.close)
    memory = PgMemoryStore(
        blocking,
        memory_char_limit=memory_char_limit,
        user_char_limit=user_char_limit,
        fence=fence,
    )
    locks = PgSessionLocks(url, connect_timeout)
    await locks.open()
    stack.push_async_callback(locks.close)
    skills = PgPrivateSkills(blocking, shared_erasures=True)
    return PgStores(database, blocking, sessions, memory, skills, locks)


def probe(url: str, timeout: float) -> None:
    """Connect once and close; a failure is `PostgresUnavailableError` with libpq's first
    line (it names the host and user, never the password)."""
    try:
        with psycopg.connect(url, connect_timeout=max(1, round(timeout))):
            pass
    except psycopg.Error as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise PostgresUnavailableError(f"cannot connect to PostgreSQL: {reason}") from None


def postgres_problem(url: str, timeout: float = 10.0) -> tuple[str, str | None]:
    """(the server and database, what keeps Mnemo from using them or None), changing
    nothing: the server answers, `pg_trgm` can be created or is there, and every
    component's recorded schema is one this code can migrate from."""
    probe(url, timeout)
    with psycopg.connect(url, connect_timeout=max(1, round(timeout))) as conn:
        found = conn.execute(
            "SELECT current_setting('server_version'), current_database(), "
            "EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'), "
            "to_regclass('mnemo_schema') IS NOT NULL"
        ).fetchone()
        assert found is not None  # one row, always
        version, database, trigrams, recorded = found
        where = f"PostgreSQL {version}, database {database}"
        if not trigrams:
            return where, "the pg_trgm extension is not available on this server"
        if not recorded:
            return f"{where} (empty: mnemo run creates the schema)", None
        rows = conn.execute("SELECT component, version, sha256 FROM mnemo_schema").fetchall()
    by_component: dict[str, dict[int, str]] = {}
    for component, step, digest in rows:
        by_component.setdefault(str(component), {})[int(step)] = str(digest)
    try:
        for component, steps in plan(ALL_MIGRATIONS).items():
            check_recorded(component, steps, by_component.get(component, {}))
    except PostgresSchemaError as err:
        return where, str(err)
    return f"{where}, schema {_versions(by_component)}", None


def _versions(recorded: dict[str, dict[int, str]]) -> str:
    return ", ".join(f"{name} v{max(steps)}" for name, steps in sorted(recorded.items()))

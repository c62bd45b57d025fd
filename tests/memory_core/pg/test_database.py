"""PgDatabase: transactions, the retry on conflicts, and versioned migrations."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from memory_core.pg import (
    PgDatabase,
    PgMigration,
    PostgresConflictError,
    PostgresSchemaError,
    PostgresUnavailableError,
)
from memory_core.pg.blocking import PgSyncDatabase
from tests.timing import scaled

# Each step counts its runs in `runs`, so a step run twice shows as 2.
V1 = PgMigration(
    "demo",
    1,
    "CREATE TABLE IF NOT EXISTS runs (version int);"
    " INSERT INTO runs VALUES (1); CREATE TABLE notes (id int);",
)
V2 = PgMigration("demo", 2, "INSERT INTO runs VALUES (2); ALTER TABLE notes ADD COLUMN text text;")
V3 = PgMigration("demo", 3, "INSERT INTO runs VALUES (3); CREATE INDEX notes_id ON notes (id);")
OTHER = PgMigration("other", 1, "CREATE TABLE other_things (id int);")


@pytest.fixture
async def db(pg_database: str) -> AsyncIterator[PgDatabase]:
    async with PgDatabase(pg_database, max_size=4) as database:
        yield database


async def _rows(db: PgDatabase, query: str) -> list[tuple[Any, ...]]:
    async with db.connection() as conn:
        return await (await conn.execute(query.encode())).fetchall()


async def _runs(db: PgDatabase) -> list[tuple[Any, ...]]:
    return await _rows(db, "SELECT version, count(*) FROM runs GROUP BY version ORDER BY version")


async def test_migrate_applies_each_missing_step_once(db: PgDatabase) -> None:
    assert await db.migrate([V2, V1, OTHER]) == {"demo": 2, "other": 1}
    assert await db.migrate([V1, V2, OTHER]) == {"demo": 2, "other": 1}
    assert await db.migrate([V1, V2, V3]) == {"demo": 3}
    assert await _runs(db) == [(1, 1), (2, 1), (3, 1)]
    recorded = await _rows(
        db, "SELECT component, version, sha256 FROM mnemo_schema ORDER BY component, version"
    )
    assert recorded == [
        ("demo", 1, V1.sha256),
        ("demo", 2, V2.sha256),
        ("demo", 3, V3.sha256),
        ("other", 1, OTHER.sha256),
    ]
    columns = await _rows(
        db, "SELECT column_name FROM information_schema.columns WHERE table_name = 'notes'"
    )
    assert sorted(columns) == [("id",), ("text",)]


async def test_concurrent_migrators_apply_each_step_once(pg_database: str) -> None:
    databases = [PgDatabase(pg_database, max_size=2) for _ in range(3)]
    await asyncio.gather(*(d.open() for d in databases))
    try:
        results = await asyncio.gather(*(d.migrate([V1, V2, V3]) for d in databases))
        assert results == [{"demo": 3}] * 3
        assert await _runs(databases[0]) == [(1, 1), (2, 1), (3, 1)]
    finally:
        await asyncio.gather(*(d.close() for d in databases))


async def test_an_edited_step_is_refused_and_nothing_runs(db: PgDatabase) -> None:
    await db.migrate([V1])
    edited = PgMigration("demo", 1, V1.sql + " -- tidied")
    with pytest.raises(PostgresSchemaError, match="demo migration v1 differs"):
        await db.migrate([edited, V2])
    assert await _runs(db) == [(1, 1)]


async def test_a_newer_schema_is_refused(db: PgDatabase) -> None:
    await db.migrate([V1, V2])
    with pytest.raises(PostgresSchemaError, match="version 2, newer than this Mnemo's 1"):
        await db.migrate([V1])
    assert await _runs(db) == [(1, 1), (2, 1)]


async def test_a_failing_step_keeps_the_previous_version_and_frees_the_lock(
    db: PgDatabase,
) -> None:
    broken = PgMigration("demo", 2, "INSERT INTO runs VALUES (2); ALTER TABLE nowhere ADD x int;")
    await db.migrate([V1])
    with pytest.raises(Exception, match="nowhere"):
        await db.migrate([V1, broken])
    assert await _runs(db) == [(1, 1)]
    assert await _rows(db, "SELECT max(version) FROM mnemo_schema") == [(1,)]
    assert await db.migrate([V1, V2]) == {"demo": 2}  # the lock was released


async def test_steps_must_be_numbered_from_one_without_gaps(db: PgDatabase) -> None:
    with pytest.raises(ValueError, match="numbered"):
        await db.migrate([V1, V3])
    with pytest.raises(ValueError, match="numbered"):
        await db.migrate([V1, V1])


async def test_a_transaction_commits_or_rolls_back_as_a_whole(db: PgDatabase) -> None:
    await db.migrate([V1])
    async with db.transaction() as conn:
        await conn.execute("INSERT INTO notes VALUES (1)")
        await conn.execute("INSERT INTO notes VALUES (2)")
    with pytest.raises(RuntimeError, match="midway"):
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO notes VALUES (3)")
            raise RuntimeError("midway")
    assert await _rows(db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,)]


class WriteSkew:
    """Two SERIALIZABLE transactions that each read the sum of `notes`, wait until both
    have read, and insert sum + 1: PostgreSQL cannot commit both as they ran."""

    def __init__(self) -> None:
        self.attempts = 0
        self.both_read = asyncio.Event()

    async def work(self, conn: Any) -> int:
        self.attempts += 1
        row = await (await conn.execute("SELECT coalesce(sum(id), 0) FROM notes")).fetchone()
        if self.attempts >= 2:
            self.both_read.set()
        await asyncio.wait_for(self.both_read.wait(), timeout=scaled(10))
        await conn.execute("INSERT INTO notes VALUES (%s)", (row[0] + 1,))
        return int(row[0]) + 1


async def test_a_serialization_failure_is_retried_until_it_commits(db: PgDatabase) -> None:
    await db.migrate([V1])
    skew = WriteSkew()
    results = await asyncio.gather(
        db.transact(skew.work, isolation="serializable"),
        db.transact(skew.work, isolation="serializable"),
    )
    assert sorted(results) == [1, 2]  # the retried one saw the other's row
    assert skew.attempts >= 3  # at least the one retry (more if the server aborted both)
    assert await _rows(db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,)]


async def test_a_conflict_past_the_attempts_is_a_memory_core_error(db: PgDatabase) -> None:
    await db.migrate([V1])
    skew = WriteSkew()
    outcomes = await asyncio.gather(
        db.transact(skew.work, isolation="serializable", attempts=1),
        db.transact(skew.work, isolation="serializable", attempts=1),
        return_exceptions=True,
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["PostgresConflictError", "int"]
    failure = next(o for o in outcomes if isinstance(o, BaseException))
    assert isinstance(failure, PostgresConflictError)
    assert "all 1 attempts" in str(failure)
    assert await _rows(db, "SELECT id FROM notes") == [(1,)]


async def test_an_unreachable_server_is_a_memory_core_error(tmp_path: Any) -> None:
    db = PgDatabase(f"postgresql://postgres@/x?host={tmp_path}", connect_timeout=0.5)
    with pytest.raises(PostgresUnavailableError, match="no connection"):
        await db.open()


class CrossedLocks:
    """Two transactions that each lock one row, wait until the other has locked its own,
    then lock the other's: a deadlock, which PostgreSQL breaks by aborting one."""

    def __init__(self) -> None:
        self.attempts = 0
        self.locked = {1: asyncio.Event(), 2: asyncio.Event()}

    async def fast_detection(self, conn: Any) -> None:
        row = await (await conn.execute("SELECT current_setting('is_superuser')")).fetchone()
        if row == ("on",):  # else the server's deadlock_timeout (1 s by default)
            await conn.execute("SET LOCAL deadlock_timeout = '20ms'")

    def work(self, first: int, second: int) -> Any:
        async def run(conn: Any) -> int:
            self.attempts += 1
            await self.fast_detection(conn)
            await conn.execute("UPDATE notes SET id = id WHERE id = %s", (first,))
            self.locked[first].set()
            await asyncio.wait_for(self.locked[second].wait(), timeout=scaled(10))
            await conn.execute("UPDATE notes SET id = id WHERE id = %s", (second,))
            return first

        return run


async def test_a_deadlock_is_retried_until_it_commits(db: PgDatabase) -> None:
    await db.migrate([V1])
    async with db.transaction() as conn:
        await conn.execute("INSERT INTO notes VALUES (1), (2)")
    crossed = CrossedLocks()
    results = await asyncio.wait_for(
        asyncio.gather(db.transact(crossed.work(1, 2)), db.transact(crossed.work(2, 1))),
        timeout=scaled(30),
    )
    assert sorted(results) == [1, 2]
    # two first tries and at least one retry (a busy machine may cross them again)
    assert crossed.attempts >= 3


# The synchronous twin: the same pool, transactions, retry and migrations, blocking.


@pytest.fixture
def sync_db(pg_database: str) -> Iterator[PgSyncDatabase]:
    with PgSyncDatabase(pg_database, max_size=4) as database:
        yield database


def _sync_rows(db: PgSyncDatabase, query: str) -> list[tuple[Any, ...]]:
    with db.connection() as conn:
        return conn.execute(query.encode()).fetchall()


def test_sync_migrate_shares_the_record_with_the_async_one(
    sync_db: PgSyncDatabase, pg_database: str
) -> None:
    assert sync_db.migrate([V1, V2]) == {"demo": 2}
    assert sync_db.migrate([V1, V2, V3]) == {"demo": 3}

    async def async_side() -> dict[str, int]:
        async with PgDatabase(pg_database, max_size=1) as database:
            return await database.migrate([V1, V2, V3])

    assert asyncio.run(async_side()) == {"demo": 3}
    runs = "SELECT version, count(*) FROM runs GROUP BY version ORDER BY version"
    assert _sync_rows(sync_db, runs) == [(1, 1), (2, 1), (3, 1)]
    with pytest.raises(PostgresSchemaError, match="demo migration v1 differs"):
        sync_db.migrate([PgMigration("demo", 1, V1.sql + " -- tidied"), V2, V3])


def test_sync_transaction_commits_or_rolls_back_as_a_whole(sync_db: PgSyncDatabase) -> None:
    sync_db.migrate([V1])
    with sync_db.transaction() as conn:
        conn.execute("INSERT INTO notes VALUES (1)")
    with pytest.raises(RuntimeError, match="midway"), sync_db.transaction() as conn:
        conn.execute("INSERT INTO notes VALUES (2)")
        raise RuntimeError("midway")
    assert _sync_rows(sync_db, "SELECT id FROM notes ORDER BY id") == [(1,)]


class ThreadedWriteSkew:
    """`WriteSkew` in two threads: each reads the sum, waits for the other to read,
    inserts sum + 1 under SERIALIZABLE; one of the two must be retried."""

    def __init__(self) -> None:
        self.attempts = 0
        self.lock = threading.Lock()
        self.both_read = threading.Event()

    def work(self, conn: Any) -> int:
        with self.lock:
            self.attempts += 1
            if self.attempts >= 2:
                self.both_read.set()
        row = conn.execute("SELECT coalesce(sum(id), 0) FROM notes").fetchone()
        assert self.both_read.wait(timeout=scaled(10))
        conn.execute("INSERT INTO notes VALUES (%s)", (row[0] + 1,))
        return int(row[0]) + 1


def test_sync_serialization_failure_is_retried_until_it_commits(
    sync_db: PgSyncDatabase,
) -> None:
    sync_db.migrate([V1])
    skew = ThreadedWriteSkew()
    with ThreadPoolExecutor(2) as pool:
        futures = [
            pool.submit(sync_db.transact, skew.work, isolation="serializable") for _ in range(2)
        ]
        results = sorted(f.result(timeout=scaled(30)) for f in futures)
    assert results == [1, 2]
    assert skew.attempts >= 3
    assert _sync_rows(sync_db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,)]


def test_sync_conflict_past_the_attempts_is_a_memory_core_error(
    sync_db: PgSyncDatabase,
) -> None:
    sync_db.migrate([V1])
    skew = ThreadedWriteSkew()

    def once() -> int | BaseException:
        try:
            return sync_db.transact(skew.work, isolation="serializable", attempts=1)
        except PostgresConflictError as err:
            return err

    with ThreadPoolExecutor(2) as pool:
        outcomes = [f.result(timeout=scaled(30)) for f in [pool.submit(once), pool.submit(once)]]
    failures = [o for o in outcomes if isinstance(o, PostgresConflictError)]
    assert len(failures) == 1 and "all 1 attempts" in str(failures[0])


def test_sync_unreachable_server_is_a_memory_core_error(tmp_path: Any) -> None:
    db = PgSyncDatabase(f"postgresql://postgres@/x?host={tmp_path}", connect_timeout=0.5)
    with pytest.raises(PostgresUnavailableError, match="no connection"):
        db.open()

"""PgDatabase and PgSyncDatabase when the server drops their connections (a restart,
`pg_terminate_backend`) or refuses writes: the error is `PostgresUnavailableError`,
the pool replaces the dead connections, and a write is tried again within its budget."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from memory_core.pg import PgDatabase, PostgresUnavailableError
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.database import unavailable

APP = "mnemo-outage-test"


def _terminate(url: str) -> int:
    """End every backend of this test's pools, as a server restart does; how many."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (APP,),
        ).fetchall()
    return len(rows)


def _named(url: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}application_name={APP}"


@pytest.fixture
async def db(pg_database: str) -> AsyncIterator[PgDatabase]:
    async with PgDatabase(_named(pg_database), min_size=3, max_size=3) as database:
        async with database.connection() as conn:
            await conn.execute("CREATE TABLE notes (id int PRIMARY KEY)")
        yield database


async def test_a_write_after_every_connection_was_dropped_is_tried_again_and_lands(
    db: PgDatabase, pg_database: str
) -> None:
    assert _terminate(pg_database) == 3  # every pooled connection is dead now

    async def insert(conn: Any) -> None:
        await conn.execute("INSERT INTO notes VALUES (1)")

    await db.transact(insert)  # the first try meets a dead connection (at BEGIN)
    async with db.connection() as conn:
        rows = await (await conn.execute("SELECT id FROM notes")).fetchall()
    assert rows == [(1,)]


async def test_a_read_on_a_dropped_connection_is_a_memory_core_error_then_the_pool_heals(
    db: PgDatabase, pg_database: str
) -> None:
    _terminate(pg_database)
    failures = 0
    for _ in range(10):  # at most the three dead connections fail, then fresh ones
        try:
            async with db.connection() as conn:
                await conn.execute("SELECT 1")
        except PostgresUnavailableError:
            failures += 1
    assert 1 <= failures <= 3
    async with db.connection() as conn:
        assert await (await conn.execute("SELECT 1")).fetchone() == (1,)


async def test_a_database_that_refuses_writes_fails_the_write_after_its_budget(
    pg_database: str,
) -> None:
    async with PgDatabase(pg_database, max_size=2, write_budget=0.3) as db:
        async with db.connection() as conn:
            await conn.execute("CREATE TABLE notes (id int PRIMARY KEY)")
        tries = 0

        async def insert(conn: Any) -> None:
            nonlocal tries
            tries += 1
            await conn.execute("SET TRANSACTION READ ONLY")  # as a full disk refuses
            await conn.execute("INSERT INTO notes VALUES (1)")

        with pytest.raises(PostgresUnavailableError, match="read-only"):
            await db.transact(insert)
        assert tries >= 2  # tried again within the budget, then given up


def test_the_blocking_pool_tries_a_write_again_after_its_connections_were_dropped(
    pg_database: str,
) -> None:
    with PgSyncDatabase(_named(pg_database), min_size=2, max_size=2) as db:
        with db.connection() as conn:
            conn.execute("CREATE TABLE notes (id int PRIMARY KEY)")
        assert _terminate(pg_database) == 2

        def insert(conn: Any) -> None:
            conn.execute("INSERT INTO notes VALUES (1)")

        db.transact(insert)  # the first try meets a dead connection
        with db.connection() as conn:
            assert len(conn.execute("SELECT id FROM notes").fetchall()) == 1


def test_what_counts_as_unavailable() -> None:
    assert unavailable(psycopg.errors.AdminShutdown())
    assert unavailable(psycopg.errors.DiskFull())
    assert unavailable(psycopg.errors.ReadOnlySqlTransaction())
    assert unavailable(psycopg.OperationalError("the connection is lost"))
    assert not unavailable(psycopg.errors.QueryCanceled())  # its own time limit
    assert not unavailable(psycopg.errors.LockNotAvailable())
    assert not unavailable(psycopg.errors.DeadlockDetected())  # a conflict, retried as one
    assert not unavailable(psycopg.errors.SerializationFailure())
    assert not unavailable(psycopg.errors.UniqueViolation())


async def test_a_read_through_read_is_run_again_on_a_fresh_connection(
    db: PgDatabase, pg_database: str
) -> None:
    assert _terminate(pg_database) == 3

    async def count(conn: Any) -> int:
        row = await (await conn.execute("SELECT count(*) FROM notes")).fetchone()
        return int(row[0])

    assert await db.read(count) == 0  # no error: the dead connections were passed over

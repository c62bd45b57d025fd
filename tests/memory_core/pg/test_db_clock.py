"""Erasure marks in the database's time: a replica whose host clock is far off is fenced
exactly, tombstones keep a digest of the person's key, and go once no work needs them.

A "replica" here is a `MarkClock` whose wall and monotonic clocks are the host's
shifted by the test (as a host 30 s ahead or behind would read them), calibrated
against the real server, as `open_postgres_stores` calibrates the process's own.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest

from memory_core.errors import PersonErasedError
from memory_core.fence import ErasureFence, MarkClock
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.database import PgDatabase
from memory_core.pg.fence import (
    FENCE_MIGRATIONS,
    PgTombstones,
    calibrate,
    check_erased_sync,
    key_digest,
    prune_tombstones,
)
from memory_core.pg.session_jobs import JOB_MIGRATIONS, PgJobQueue
from memory_core.sessions import JobRequest

ALICE, BOB = "telegram-1001", "telegram-2002"
SECOND = 1_000_000_000


def skewed(seconds: int) -> MarkClock:
    """The clocks of a host `seconds` ahead (negative: behind) of the true time (faketime
    shifts the monotonic clock too)."""
    shift = seconds * SECOND
    return MarkClock(
        wall=lambda: time.time_ns() + shift, monotonic=lambda: time.monotonic_ns() + shift
    )


@pytest.fixture
async def database(pg_database: str) -> AsyncIterator[PgDatabase]:
    async with PgDatabase(pg_database, max_size=4) as db:
        await db.migrate((*JOB_MIGRATIONS, *FENCE_MIGRATIONS))
        yield db


@pytest.fixture
def blocking(database: PgDatabase, pg_database: str) -> Iterator[PgSyncDatabase]:
    with PgSyncDatabase(pg_database, max_size=2) as db:
        yield db


def erased_since(db: PgSyncDatabase, user_key: str, began: int) -> bool:
    with db.transaction() as conn:
        try:
            check_erased_sync(conn, user_key, began)
        except PersonErasedError:
            return True
    return False


@pytest.mark.parametrize("seconds", [30, -30])
async def test_a_replica_whose_clock_is_off_by_30_s_is_fenced_exactly(
    database: PgDatabase, blocking: PgSyncDatabase, seconds: int
) -> None:
    marks = skewed(seconds)
    assert abs(marks.now() - time.time_ns() - seconds * SECOND) < SECOND  # off, uncalibrated
    error = await calibrate(database, marks)
    assert error < 50_000_000  # half a loopback round trip, far under 50 ms
    assert abs(marks.now() - time.time_ns()) < 100_000_000  # the server's time, not the host's

    before = marks.next()  # a turn of Alice's begins on the skewed replica
    time.sleep(0.05)  # then, 50 ms later, another replica (on time) erases her
    fence = ErasureFence(PgTombstones(blocking))
    erased = fence.erasing(ALICE)
    time.sleep(0.05)
    after = marks.next()  # her next message, 50 ms after the erasure

    assert before < erased < after
    assert erased_since(blocking, ALICE, before)  # the turn in flight writes nothing
    assert not erased_since(blocking, ALICE, after)  # the next one is answered at once
    assert not erased_since(blocking, BOB, before)


async def test_a_recalibration_never_hands_out_an_older_mark(database: PgDatabase) -> None:
    ahead = [0]
    marks = MarkClock(monotonic=lambda: time.monotonic_ns() + ahead[0])
    await calibrate(database, marks)
    first = marks.next()
    ahead[0] = 5 * SECOND  # the monotonic clock jumped: marks run 5 s fast until recalibrated
    fast = marks.next()
    await calibrate(database, marks)
    assert fast - first >= 5 * SECOND
    assert marks.next() > fast  # back on the server's time, yet still increasing


async def test_a_tombstone_keeps_a_digest_of_the_key_never_the_key(
    database: PgDatabase, blocking: PgSyncDatabase
) -> None:
    first = PgTombstones(blocking).record(ALICE)
    second = PgTombstones(blocking).record(ALICE)  # erased again: one row, the later mark
    assert second > first
    async with database.connection() as conn:
        rows = await (await conn.execute("SELECT * FROM person_erasures")).fetchall()
        cur = await conn.execute("SELECT key_digest, erased_mark FROM person_erasures")
        assert await cur.fetchall() == [(hashlib.sha256(ALICE.encode()).digest(), second)]
    assert len(rows) == 1 and "1001" not in repr(rows)  # no column holds the key
    assert key_digest(ALICE) == hashlib.sha256(ALICE.encode()).digest()


async def test_migration_2_turns_the_kept_keys_into_digests(pg_database: str) -> None:
    async with PgDatabase(pg_database, max_size=2) as db:
        await db.migrate(FENCE_MIGRATIONS[:1])
        async with db.connection() as conn:
            await conn.execute(
                "INSERT INTO person_erasures (user_key, erased_mark) VALUES (%s, %s), (%s, %s)",
                (ALICE, 5 * SECOND, BOB, 7 * SECOND),
            )
        await db.migrate((*JOB_MIGRATIONS, *FENCE_MIGRATIONS))
        async with db.connection() as conn:
            cur = await conn.execute(
                "SELECT key_digest, erased_mark FROM person_erasures ORDER BY erased_mark"
            )
            rows = await cur.fetchall()
            columns = await conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'person_erasures' AND table_schema = current_schema()"
            )
            names = {str(row[0]) for row in await columns.fetchall()}
    assert rows == [(key_digest(ALICE), 5 * SECOND), (key_digest(BOB), 7 * SECOND)]
    assert names == {"key_digest", "erased_mark"}
    with PgSyncDatabase(pg_database, max_size=1) as blocking:
        assert erased_since(blocking, ALICE, 4 * SECOND)  # the old marks still fence
        assert not erased_since(blocking, ALICE, 6 * SECOND)


async def _marks(db: PgDatabase) -> list[int]:
    async with db.connection() as conn:
        cur = await conn.execute("SELECT erased_mark FROM person_erasures ORDER BY 1")
        return [int(row[0]) for row in await cur.fetchall()]


async def test_tombstones_go_once_no_work_older_can_exist(database: PgDatabase) -> None:
    now = time.time_ns()
    day, hour = 86_400 * SECOND, 3_600 * SECOND
    async with database.connection() as conn:
        for user, age in ((ALICE, day + 2 * hour), (BOB, day - hour)):
            await conn.execute(
                "INSERT INTO person_erasures (key_digest, erased_mark) VALUES (%s, %s)",
                (key_digest(user), now - age),
            )
    queue = PgJobQueue(database)
    old_work = JobRequest("extract", "9", "telegram-3", "", now - day - 3 * hour)
    assert await queue.enqueue(old_work)  # an open job begun before Alice's erasure
    await queue.prune(86_400.0)
    assert await _marks(database) == [now - day - 2 * hour, now - day + hour]  # both kept

    [job] = await queue.claim("a", 60.0, 1)
    assert await queue.finish(job.id, "a")  # that work is done
    await queue.prune(86_400.0)  # the sweep's prune: Alice's tombstone is a day and 2 h old
    assert await _marks(database) == [now - day + hour]  # Bob's is within the horizon
    async with database.connection() as conn:
        assert await prune_tombstones(conn, kept=3_600.0) == 1  # a shorter horizon: gone
    assert await _marks(database) == []


async def test_the_digest_column_refuses_a_second_row_for_one_person(
    blocking: PgSyncDatabase,
) -> None:
    PgTombstones(blocking).record(ALICE)
    with pytest.raises(psycopg.errors.UniqueViolation), blocking.transaction() as conn:
        conn.execute(
            "INSERT INTO person_erasures (key_digest, erased_mark) VALUES (%s, 1)",
            (key_digest(ALICE),),
        )

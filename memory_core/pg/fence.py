"""Erasures every replica sees: tombstones in the database, checked inside each write.

`PgTombstones.record` keeps a person's erasure (`person_erasures`, one row per
person, the latest mark) in its own committed transaction before any store
removes a row; `check_erased` / `check_erased_sync` run inside a store's write
transaction, after the write took its lock on the person (the sessions' shared
advisory lock, the memory row lock, the skills' person lock), and refuse the
write with `PersonErasedError` when the person was erased after the work began.

The database's clock. A tombstone's mark is the server's `clock_timestamp()`
(nanoseconds since the epoch), taken in the recording transaction; a work's
mark is the same clock as this process sees it: `calibrate` reads the
server's time a few times, each reading bracketed by two readings of the
host's monotonic clock, and the process's `MarkClock` adopts the sample with
the shortest round trip (`memory_core.fence`); `keep_calibrated` does it again
every `CALIBRATE_SECONDS`. Marks are then the server's time carried forward by
the host's monotonic clock, so the host's wall clock, however far off, plays
no part and no margin is needed. The error left is half the best sample's
round trip (its midpoint is the estimate; the server read its clock somewhere
between), well under a millisecond on one network, plus the monotonic clock's
drift since the last calibration (a few parts per million of a minute): work
begun that close to an erasure on another replica may fall on either side of
it, as two events that close in time could.

The tombstone keeps the sha256 of the person's key (`key_digest`), never the
key (sha256 so that migration 2 converts the old rows in SQL). It is needed
only while work begun before it may still write: `prune_tombstones` (called by
the jobs queue's `prune`, which the sweep runs) removes those older than
`TOMBSTONE_KEPT_SECONDS` and older than every open job's mark (a job runs as
work begun when it was asked for, however late it runs). Other work begins
when it starts: a turn (even one answering a message queued up to a day
before) or a replay at start-up takes a new mark, and runs for minutes, not
the day and hour the tombstone is kept. A digest of a key as guessable as a
platform user id can be matched by trying ids; what protects the person is
that the row goes once it is no longer needed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

from psycopg import AsyncConnection, Connection

from memory_core.errors import PersonErasedError
from memory_core.fence import MarkClock
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.database import PgDatabase
from memory_core.pg.migrations import PgMigration

log = logging.getLogger(__name__)

COMPONENT = "fence"
CALIBRATE_SECONDS = 60.0  # how often each process measures its offset to the server clock
CALIBRATE_SAMPLES = 3  # readings per calibration; the shortest round trip is kept
# A day (messages unanswered longer are left alone, gateway.replicas.UNANSWERED_WITHIN)
# and an hour (more than any turn, or a job lease, lasts): no work older exists.
TOMBSTONE_KEPT_SECONDS = 86_400.0 + 3_600.0

_V1 = """
CREATE TABLE person_erasures (
    user_key TEXT PRIMARY KEY,
    erased_mark BIGINT NOT NULL
);
"""

_V2 = """
ALTER TABLE person_erasures ADD COLUMN key_digest BYTEA;
UPDATE person_erasures SET key_digest = sha256(convert_to(user_key, 'UTF8'));
ALTER TABLE person_erasures DROP CONSTRAINT person_erasures_pkey;
ALTER TABLE person_erasures DROP COLUMN user_key;
ALTER TABLE person_erasures ALTER COLUMN key_digest SET NOT NULL;
ALTER TABLE person_erasures ADD PRIMARY KEY (key_digest);
CREATE INDEX person_erasures_mark ON person_erasures (erased_mark);
"""

FENCE_MIGRATIONS: tuple[PgMigration, ...] = (
    PgMigration(COMPONENT, 1, _V1),
    PgMigration(COMPONENT, 2, _V2),
)

NOW_NS = "(extract(epoch FROM clock_timestamp()) * 1000000000)::bigint"
"""The server's clock in nanoseconds since the epoch, as marks are."""

_RECORD = (
    "INSERT INTO person_erasures (key_digest, erased_mark) VALUES (%s, " + NOW_NS + ") "
    "ON CONFLICT (key_digest) DO UPDATE "
    "SET erased_mark = greatest(person_erasures.erased_mark, EXCLUDED.erased_mark) "
    "RETURNING erased_mark"
)
_ERASED_SINCE = "SELECT 1 FROM person_erasures WHERE key_digest = %s AND erased_mark > %s"
_SERVER_NOW = "SELECT " + NOW_NS
_PRUNE = (
    "DELETE FROM person_erasures WHERE erased_mark < " + NOW_NS + " - %s "
    "AND NOT EXISTS (SELECT 1 FROM jobs WHERE done_at IS NULL AND mark <= erased_mark)"
)
_REFUSED = "this person's data was erased after this work began; nothing was written"


def key_digest(user_key: str) -> bytes:
    """What a tombstone keeps of the person's key: its sha256."""
    return hashlib.sha256(user_key.encode("utf-8")).digest()


class PgTombstones:
    """The shared tombstones of one database (`memory_core.fence.SharedTombstones`)."""

    def __init__(self, db: PgSyncDatabase) -> None:
        self._db = db

    def record(self, user_key: str) -> int:
        with self._db.transaction() as conn:
            row = conn.execute(_RECORD, (key_digest(user_key),)).fetchone()
        assert row is not None  # an upsert's RETURNING gives its row
        return int(row[0])


async def check_erased(conn: AsyncConnection[Any], user_key: str, began: int) -> None:
    """Refuse a write about `user_key` by work begun at `began`, erased since (async)."""
    cur = await conn.execute(_ERASED_SINCE, (key_digest(user_key), began))
    if await cur.fetchone() is not None:
        raise PersonErasedError(_REFUSED)


def check_erased_sync(conn: Connection[Any], user_key: str, began: int) -> None:
    """`check_erased` on a blocking connection."""
    if conn.execute(_ERASED_SINCE, (key_digest(user_key), began)).fetchone() is not None:
        raise PersonErasedError(_REFUSED)


async def prune_tombstones(conn: AsyncConnection[Any], kept: float = TOMBSTONE_KEPT_SECONDS) -> int:
    """Remove the tombstones older than `kept` seconds that no open job began before
    (the `jobs` table's); how many."""
    cur = await conn.execute(_PRUNE, (round(kept * 1e9),))
    return max(cur.rowcount, 0)


async def calibrate(db: PgDatabase, marks: MarkClock, samples: int = CALIBRATE_SAMPLES) -> int:
    """Set `marks` to the server's clock: `samples` readings, each bracketed by two
    monotonic readings, the shortest round trip adopted; its error bound (ns)."""
    best: tuple[int, int, int] | None = None
    async with db.connection() as conn:
        for _ in range(samples):
            sent = marks.monotonic()
            row = await (await conn.execute(_SERVER_NOW)).fetchone()
            received = marks.monotonic()
            assert row is not None  # a SELECT of one value
            if best is None or received - sent < best[2] - best[1]:
                best = (int(row[0]), sent, received)
    assert best is not None  # samples >= 1
    marks.adopt(*best)
    return marks.error_ns


async def keep_calibrated(
    db: PgDatabase, marks: MarkClock, every: float = CALIBRATE_SECONDS
) -> None:
    """`calibrate` every `every` seconds until cancelled (a failure keeps the last one)."""
    while True:
        await asyncio.sleep(every)
        try:
            await calibrate(db, marks)
        except Exception:  # the database is away: the last calibration still holds
            log.warning("could not read the database's clock", exc_info=True)

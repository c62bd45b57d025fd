"""Erasures every replica sees: tombstones in the database, checked inside each write.

`PgTombstones.record` keeps a person's erasure (`person_erasures`, one row per
person, the latest mark) in its own committed transaction before any store
removes a row; `check_erased` / `check_erased_sync` run inside a store's write
transaction, after the write took its lock on the person (the sessions' shared
advisory lock, the memory row lock, the skills' person lock), and refuse the
write with `PersonErasedError` when the person was erased after the work began.

Marks are wall-clock nanoseconds of the process that made them
(`memory_core.fence`). Hosts' clocks differ a little, so a write is refused
when the erasure is newer than `began - CLOCK_MARGIN`: work that began up to
that long after an erasure on another host is refused too (the person sees the
"erased" line and sends again), never the other way round. Within one process
the in-memory fence is exact and is checked first.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection, Connection

from memory_core.errors import PersonErasedError
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.migrations import PgMigration

COMPONENT = "fence"
CLOCK_MARGIN_NS = 2_000_000_000  # two seconds: more than NTP-kept hosts drift apart

_V1 = """
CREATE TABLE person_erasures (
    user_key TEXT PRIMARY KEY,
    erased_mark BIGINT NOT NULL
);
"""

FENCE_MIGRATIONS: tuple[PgMigration, ...] = (PgMigration(COMPONENT, 1, _V1),)

_RECORD = (
    "INSERT INTO person_erasures (user_key, erased_mark) VALUES (%s, %s) "
    "ON CONFLICT (user_key) DO UPDATE "
    "SET erased_mark = greatest(person_erasures.erased_mark, EXCLUDED.erased_mark)"
)
_ERASED_SINCE = "SELECT 1 FROM person_erasures WHERE user_key = %s AND erased_mark > %s"
_REFUSED = "this person's data was erased after this work began; nothing was written"


class PgTombstones:
    """The shared tombstones of one database (`memory_core.fence.SharedTombstones`)."""

    def __init__(self, db: PgSyncDatabase) -> None:
        self._db = db

    def record(self, user_key: str, mark: int) -> None:
        with self._db.transaction() as conn:
            conn.execute(_RECORD, (user_key, mark))


def _since(began: int) -> int:
    return began - CLOCK_MARGIN_NS


async def check_erased(conn: AsyncConnection[Any], user_key: str, began: int) -> None:
    """Refuse a write about `user_key` by work begun at `began`, erased since (async)."""
    cur = await conn.execute(_ERASED_SINCE, (user_key, _since(began)))
    if await cur.fetchone() is not None:
        raise PersonErasedError(_REFUSED)


def check_erased_sync(conn: Connection[Any], user_key: str, began: int) -> None:
    """`check_erased` on a blocking connection."""
    if conn.execute(_ERASED_SINCE, (user_key, _since(began))).fetchone() is not None:
        raise PersonErasedError(_REFUSED)

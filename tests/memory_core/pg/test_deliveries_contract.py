"""`first_delivery` on both session stores: a delivery is the first once, across a restart
and across stores sharing one database, kept as a digest, forgotten after two days.

Every test runs against SessionStore (SQLite) and PgSessionStore; `Backend` opens a
store of either kind over the same storage, as a restarted process (or a second
replica) would, and reads the stored rows whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory_core.fence import ErasureFence
from memory_core.pg.database import PgDatabase
from memory_core.pg.session_deliveries import first_delivery as pg_first_delivery
from memory_core.pg.sessions import PgSessionStore
from memory_core.sessions.backend import SessionBackend
from memory_core.sessions.deliveries import KEEP, PRUNE_EVERY, delivery_digest
from memory_core.sessions.store import SessionStore
from tests.clock import Clock

NOW = 1_700_000_000.0
COMMAND = json.dumps(["command", "1001", None, "77"])  # chat 1001, message 77


class Backend:
    """Stores of one kind over one storage: each `opened` one a process of its own."""

    def __init__(self, kind: str, path: Path, url: str, clock: Clock) -> None:
        self.kind, self._path, self._url, self.clock = kind, path, url, clock

    @contextlib.asynccontextmanager
    async def opened(self) -> AsyncIterator[SessionBackend]:
        if self.kind == "sqlite":
            async with SessionStore(self._path, clock=self.clock, fence=ErasureFence()) as lite:
                yield lite
            return
        async with (
            PgDatabase(self._url, max_size=4) as db,
            PgSessionStore(db, clock=self.clock, fence=ErasureFence()) as store,
        ):
            yield store

    async def rows(self) -> list[tuple[Any, ...]]:
        """Every row of the deliveries table, whole."""
        if self.kind == "sqlite":
            with contextlib.closing(sqlite3.connect(self._path)) as conn:
                return conn.execute("SELECT * FROM deliveries").fetchall()
        async with PgDatabase(self._url, max_size=1) as db, db.connection() as conn:
            cursor = await conn.execute(b"SELECT * FROM deliveries")
            return [tuple(row) for row in await cursor.fetchall()]


@pytest.fixture(params=["sqlite", "pg"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    url = request.getfixturevalue("pg_database") if request.param == "pg" else ""
    return Backend(request.param, tmp_path / "state.db", url, Clock(NOW))


async def test_a_delivery_is_the_first_once_and_only_for_its_platform_and_key(
    backend: Backend,
) -> None:
    async with backend.opened() as store:
        assert await store.first_delivery("telegram", COMMAND)
        assert not await store.first_delivery("telegram", COMMAND)
        assert not await store.first_delivery("telegram", COMMAND)
        assert await store.first_delivery("discord", COMMAND)  # another platform's
        assert await store.first_delivery("telegram", COMMAND.replace("77", "78"))


async def test_a_delivery_seen_before_a_restart_is_not_the_first_after_it(
    backend: Backend,
) -> None:
    async with backend.opened() as before:
        assert await before.first_delivery("telegram", COMMAND)
    async with backend.opened() as after:
        assert not await after.first_delivery("telegram", COMMAND)


async def test_of_a_delivery_given_to_two_stores_at_once_only_one_is_the_first(
    backend: Backend,
) -> None:
    """Two stores over one storage (replicas on PostgreSQL), each asked many times at once."""
    async with backend.opened() as one, backend.opened() as two:
        asked = [store.first_delivery("telegram", COMMAND) for store in (one, two) * 10]
        answers = await asyncio.gather(*asked)
    assert sorted(answers) == [False] * 19 + [True]


async def test_a_delivery_is_kept_as_a_digest_never_as_its_ids(backend: Backend) -> None:
    """An erased person's ids must stay in no table: the row holds the sha256 and a time."""
    async with backend.opened() as store:
        assert await store.first_delivery("telegram", COMMAND)
    [row] = await backend.rows()
    digest = hashlib.sha256(f"telegram\x00{COMMAND}".encode()).digest()
    assert bytes(row[0]) == digest == delivery_digest("telegram", COMMAND)
    assert row[-1] == NOW
    text = repr(row)
    assert "1001" not in text and "telegram" not in text and "command" not in text


async def test_deliveries_two_days_old_are_pruned_with_every_hundredth_record(
    backend: Backend,
) -> None:
    """The first record a store makes prunes, then every `PRUNE_EVERY`-th: in between an
    old record stays, and a record less than two days old is never pruned."""
    clock = backend.clock
    async with backend.opened() as store:
        assert await store.first_delivery("telegram", "old")  # record 0: prunes nothing
        clock.now = NOW + KEEP / 2
        assert await store.first_delivery("telegram", "recent")  # record 1
        clock.now = NOW + KEEP + 1
        assert not await store.first_delivery("telegram", "old")  # record 2: no prune
        for n in range(3, PRUNE_EVERY):
            assert await store.first_delivery("telegram", f"key {n}")
        assert len(await backend.rows()) == PRUNE_EVERY - 1
        assert await store.first_delivery("telegram", "old")  # record 100: pruned first
        assert not await store.first_delivery("telegram", "recent")
        assert len(await backend.rows()) == PRUNE_EVERY - 1  # "old" again, for two days


async def test_a_restarted_store_prunes_with_its_first_record(backend: Backend) -> None:
    async with backend.opened() as before:
        assert await before.first_delivery("telegram", "old")
    backend.clock.now = NOW + KEEP + 1
    async with backend.opened() as after:
        assert await after.first_delivery("telegram", "new")
        assert [bytes(row[0]) for row in await backend.rows()] == [
            delivery_digest("telegram", "new")
        ]


async def test_a_call_run_again_after_its_commit_finds_its_own_claim(pg_database: str) -> None:
    """`PgDatabase.transact` runs a write again when its connection was lost, even after its
    commit: the call recognises the row it wrote, and still counts as the first."""
    digest = delivery_digest("telegram", COMMAND)
    mine, theirs = os.urandom(16), os.urandom(16)
    async with PgDatabase(pg_database, max_size=2) as db:
        async with PgSessionStore(db):  # migrates
            pass

        async def record(claim: bytes) -> bool:
            return await db.transact(
                lambda conn: pg_first_delivery(conn, digest, claim, NOW, prune=False)
            )

        assert await record(mine)
        assert await record(mine)  # the same call, run again
        assert not await record(theirs)

"""Session locks across replicas: PostgreSQL advisory locks on one connection per replica."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memory_core import NewMessage, SessionMark, SessionOrigin, StorageSettings, open_storage
from memory_core.pg.session_locks import PgSessionLocks, lock_number, stop_channel
from tests.fakes.base import wait_until
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
async def replicas(pg_database: str) -> AsyncIterator[tuple[PgSessionLocks, PgSessionLocks]]:
    first, second = PgSessionLocks(pg_database), PgSessionLocks(pg_database)
    await first.open()
    await second.open()
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def test_a_held_session_keeps_the_other_replica_out_until_released(
    replicas: tuple[PgSessionLocks, PgSessionLocks],
) -> None:
    alice_here, alice_there = replicas
    entered = asyncio.Event()
    release = asyncio.Event()

    async def slow_turn() -> None:
        async with alice_here.hold("telegram:private:alice"):
            entered.set()
            await release.wait()

    holder = asyncio.create_task(slow_turn())
    await asyncio.wait_for(entered.wait(), scaled(5))
    async with alice_there.try_hold("telegram:private:alice") as got:
        assert got is False
    async with alice_there.try_hold("telegram:private:bob") as got:  # Bob is not blocked
        assert got is True
    waited = asyncio.Event()

    async def waiting_turn() -> None:
        async with alice_there.hold("telegram:private:alice"):
            waited.set()

    waiter = asyncio.create_task(waiting_turn())
    await asyncio.sleep(0.1)  # the waiter has asked a few times by now
    assert not waited.is_set()
    release.set()
    await asyncio.wait_for(waiter, scaled(5))
    await holder
    async with alice_here.try_hold("telegram:private:alice") as got:  # nothing left held
        assert got is True


async def test_a_dead_replicas_locks_are_released_with_its_connection(
    replicas: tuple[PgSessionLocks, PgSessionLocks], pg_database: str
) -> None:
    _, survivor = replicas
    dying = PgSessionLocks(pg_database)
    await dying.open()
    held = asyncio.Event()

    async def cut_turn() -> None:
        async with dying.hold("telegram:private:alice"):
            held.set()
            await asyncio.Event().wait()  # a turn that never ends by itself

    task = asyncio.create_task(cut_turn())
    await asyncio.wait_for(held.wait(), scaled(5))
    async with survivor.try_hold("telegram:private:alice") as got:
        assert got is False
    conn = dying._conn  # the replica dies: its connection closes with nothing released
    assert conn is not None
    await conn.close()

    async def taken_over() -> bool:
        async with survivor.try_hold("telegram:private:alice") as got:
            return got

    # the server lets go when its backend for that connection ends, a moment later
    await wait_until(taken_over, 10, "the dead replica's lock let go", interval=0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await dying.close()


async def test_a_wait_cancelled_leaves_nothing_locked(
    replicas: tuple[PgSessionLocks, PgSessionLocks],
) -> None:
    first, second = replicas
    async with first.hold("discord:group:1:bob"):
        asked = asyncio.create_task(_hold_briefly(second, "discord:group:1:bob"))
        await wait_until(lambda: "discord:group:1:bob" in second._keys, 5)
        asked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asked
    async with second.try_hold("discord:group:1:bob") as got:
        assert got is True
    async with first.try_hold("discord:group:1:bob") as got:
        assert got is True


async def _hold_briefly(locks: PgSessionLocks, key: str) -> None:
    async with locks.hold(key):
        pass


async def test_a_stop_reaches_the_replica_holding_the_session_and_survives_a_dropped_listener(
    replicas: tuple[PgSessionLocks, PgSessionLocks],
) -> None:
    running_here, asked_there = replicas
    heard: list[str] = []
    running_here.on_stop(heard.append)
    asked_there.on_stop(lambda key: None)  # the asker hears its own request too: no harm
    alice, bob = "telegram:private:alice", "telegram:private:bob"
    async with running_here.hold(alice):  # Alice's turn runs here; Bob has none anywhere
        assert await asked_there.stop_elsewhere(bob) is False
        assert await asked_there.stop_elsewhere(alice) is True
        await wait_until(lambda: heard == [alice])
        dropped = running_here._listening  # the listening connection is cut by the server
        assert dropped is not None
        await asked_there._connection()
        conn = asked_there._conn
        assert conn is not None
        await conn.execute("SELECT pg_terminate_backend(%s)", (dropped.info.backend_pid,))
        await wait_until(lambda: running_here._listening not in (None, dropped))
        assert await asked_there.stop_elsewhere(alice) is True
        await wait_until(lambda: heard == [alice, alice])
    assert await asked_there.stop_elsewhere(alice) is False  # the turn ended: nothing held
    assert heard == [alice, alice]


def test_lock_numbers_differ_by_schema_and_key() -> None:
    assert stop_channel("bot_a") != stop_channel("bot_b")

    numbers = {lock_number(s, k) for s in ("bot_a", "bot_b") for k in ("k1", "k2")}
    assert len(numbers) == 4
    assert all(-(2**63) <= n < 2**63 for n in numbers)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_sessions_mark_moves_with_each_write_on_either_store(
    backend: str, pg_database: str, tmp_path: Path
) -> None:
    url = pg_database if backend == "postgresql" else None
    settings = StorageSettings(home=tmp_path / "data", skills_dir=ROOT / "skills", url=url)
    key = "telegram:private:alice"
    origin = SessionOrigin(key, "telegram", "telegram-alice", "alice", "private")
    async with open_storage(settings) as storage:
        store = storage.sessions
        assert await store.session_mark(key) is None
        first = await store.append_messages(
            origin=origin, messages=[NewMessage("user", "hi", time.time(), "m1")]
        )
        mark = await store.session_mark(key)
        assert mark == SessionMark(first.session_id, first.message_ids[0], None)
        await store.set_system_prompt(first.session_id, "You are Mnemo. é")
        prompted = await store.session_mark(key)
        assert prompted == SessionMark(first.session_id, first.message_ids[0], 16)
        again = await store.append_messages(
            origin=origin, messages=[NewMessage("user", "hi", time.time(), "m1")]
        )
        assert again.inserted == 0 and await store.session_mark(key) == prompted
        later = await store.append_messages(
            origin=origin, messages=[NewMessage("assistant", "hello", time.time(), key="t:1")]
        )
        assert await store.session_mark(key) == SessionMark(
            first.session_id, later.message_ids[0], 16
        )
        await store.end_session(first.session_id, "new")
        assert await store.session_mark(key) is None


async def _held_turn(locks: PgSessionLocks, key: str, leave: asyncio.Event) -> asyncio.Task[None]:
    entered = asyncio.Event()

    async def turn() -> None:
        async with locks.hold(key):
            entered.set()
            await leave.wait()

    holder = asyncio.create_task(turn())
    await asyncio.wait_for(entered.wait(), scaled(5))
    return holder


def _advisory_holders(url: str) -> set[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
        ).fetchall()
    return {int(row[0]) for row in rows}


def _cut(url: str, take: int | None = None) -> psycopg.Connection[Any]:
    """End the backend holding advisory locks (as a restart or `pg_terminate_backend`
    does); with `take`, this connection takes that lock the moment the server frees it."""
    conn = psycopg.connect(url, autocommit=True)
    ended = conn.execute(
        "SELECT pg_terminate_backend(l.pid) FROM pg_locks l "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.pid <> pg_backend_pid()"
    ).fetchall()
    assert len(ended) == 1
    if take is not None:
        conn.execute("SELECT pg_advisory_lock(%s)", (take,))  # before any reconnect can
    return conn


async def test_a_lock_whose_connection_broke_is_taken_again_and_its_turn_goes_on(
    replicas: tuple[PgSessionLocks, PgSessionLocks], pg_database: str
) -> None:
    here, there = replicas
    lost: list[list[str]] = []
    here.on_lost(lost.append)
    key, leave = "telegram:private:alice", asyncio.Event()
    holder = await _held_turn(here, key, leave)
    before = _advisory_holders(pg_database)
    _cut(pg_database).close()

    def held_anew() -> bool:
        now = _advisory_holders(pg_database)
        return len(now) == 1 and now != before

    await wait_until(held_anew, timeout=10)  # by a new connection of this replica's

    async def taken_by_here() -> bool:
        async with there.try_hold(key) as got:
            return not got

    assert await taken_by_here()  # held again: nobody else may take it
    assert lost == []  # no turn stopped
    leave.set()
    await asyncio.wait_for(holder, scaled(5))
    async with there.try_hold(key) as got:  # released at the block's end
        assert got is True


async def test_a_lock_another_replica_took_meanwhile_is_lost_and_not_released_later(
    replicas: tuple[PgSessionLocks, PgSessionLocks], pg_database: str
) -> None:
    here, _ = replicas
    lost: list[list[str]] = []
    here.on_lost(lost.append)
    key, leave = "telegram:private:alice", asyncio.Event()
    holder = await _held_turn(here, key, leave)
    number = lock_number(here._namespace, key)
    other = _cut(pg_database, take=number)  # another replica has it now
    try:
        await wait_until(lambda: lost == [[key]], timeout=10)  # its turn stops
        assert not here.held(key)
        leave.set()
        # leaving the block releases nothing, raises nothing
        await asyncio.wait_for(holder, scaled(5))
        async with here.try_hold(key) as got:
            assert got is False  # still the other's
    finally:
        other.close()  # the server frees its lock once that backend has gone

    async def free_again() -> bool:
        async with here.try_hold(key) as got:  # and this replica works on for the next one
            return got

    await wait_until(free_again, 10, "the lock free again", interval=0.05)

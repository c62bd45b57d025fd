"""PgMemoryStore's own guarantees: the fence under the row lock, erasure in one
transaction, versions, the history's trim."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from memory_core.errors import PersonErasedError
from memory_core.fence import ErasureFence, working
from memory_core.file_memory.edits import Operation
from memory_core.file_memory.ledger import HISTORY_LIMIT, HISTORY_SLACK
from memory_core.file_memory.origin import Origin
from memory_core.pg.database import PgDatabase
from memory_core.pg.memory import PgMemoryStore
from memory_core.pg.memory_schema import MEMORY_MIGRATIONS

ALICE, BOB = "telegram-1001", "discord-2002"
TABLES = ("memory_versions", "memory_entries", "memory_history", "memory_archive")


@pytest.fixture
async def db(pg_database: str) -> AsyncIterator[PgDatabase]:
    async with PgDatabase(pg_database, max_size=4) as database:
        assert await database.migrate(MEMORY_MIGRATIONS) == {"memory": 1}
        yield database


@pytest.fixture
def store(db: PgDatabase) -> PgMemoryStore:
    return PgMemoryStore(db, user_char_limit=200, fence=ErasureFence())


async def _rows(db: PgDatabase, query: str, *params: Any) -> list[tuple[Any, ...]]:
    async with db.connection() as conn:
        return await (await conn.execute(query.encode(), params)).fetchall()


async def _add(
    store: PgMemoryStore, key: str | None, text: str, origin: Origin | None = None
) -> None:
    target = "memory" if key is None else "user"
    await store.apply(target, key, [Operation("add", content=text)], origin or Origin("operator"))


async def _wait_for_lock_waiters(db: PgDatabase, count: int) -> None:
    """Until `count` backends of this database wait on a row lock (10 s at most)."""
    deadline = time.monotonic() + 10
    query = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    while (await _rows(db, query))[0][0] < count:
        assert time.monotonic() < deadline, "the write never waited for the lock"
        await asyncio.sleep(0.005)


async def _holding_the_row(url: str, key: str) -> psycopg.AsyncConnection[Any]:
    conn = await psycopg.AsyncConnection.connect(url)
    await conn.execute(
        "SELECT 1 FROM memory_versions WHERE target = 'user' AND user_key = %s FOR UPDATE", (key,)
    )
    return conn


async def test_a_write_waiting_for_the_lock_when_the_erasure_begins_is_refused(
    pg_database: str, db: PgDatabase, store: PgMemoryStore
) -> None:
    await _add(store, ALICE, "Alice likes tea")
    holder = await _holding_the_row(pg_database, ALICE)
    try:
        with working():  # the write begins now, before the erasure
            write = asyncio.create_task(
                store.apply("user", ALICE, [Operation("add", content="Alice likes jazz")])
            )
        await _wait_for_lock_waiters(db, 1)  # it passed the fence's first check
        store.fence.erasing(ALICE)
    finally:
        await holder.rollback()
        await holder.close()
    with pytest.raises(PersonErasedError):
        await write
    assert (await store.read("user", ALICE)).entries == ("Alice likes tea",)
    assert [c.after for c in await store.history("user", ALICE)] == ["Alice likes tea"]


async def test_an_erasure_waits_for_a_write_in_progress_and_removes_it_too(
    pg_database: str, db: PgDatabase, store: PgMemoryStore
) -> None:
    await _add(store, ALICE, "Alice likes tea")
    holder = await _holding_the_row(pg_database, ALICE)
    try:
        await holder.execute(
            "INSERT INTO memory_entries (target, user_key, position, text, origin_kind)"
            " VALUES ('user', %s, 1, 'written by the holder', 'person')",
            (ALICE,),
        )
        store.fence.erasing(ALICE)
        erase = asyncio.create_task(store.erase_user(ALICE))
        await _wait_for_lock_waiters(db, 1)
        await holder.commit()  # the write in progress lands, then the erasure runs
    finally:
        await holder.close()
    assert await erase is True
    for table in TABLES:
        assert await _rows(db, f"SELECT * FROM {table} WHERE user_key = %s", ALICE) == []


async def test_after_an_erasure_no_table_holds_the_persons_words_or_key(
    db: PgDatabase, store: PgMemoryStore
) -> None:
    await _add(store, ALICE, "Alice's secret: she hums Abba", Origin("person", session_id=3))
    await _add(store, ALICE, "Review: Alice likes marzipan", Origin("review", session_id=4))
    await store.apply("user", ALICE, [Operation("remove", old_text="marzipan")])
    await _add(store, BOB, "Bob likes rain", Origin("admin", by=ALICE))
    await _add(store, None, "House rule: no spoilers", Origin("admin", by=ALICE))
    store.fence.erasing(ALICE)
    assert await store.erase_user(ALICE) is True
    for table in TABLES:
        dump = str(await _rows(db, f"SELECT * FROM {table}"))
        assert ALICE not in dump and "Abba" not in dump and "marzipan" not in dump
    assert (await store.read("user", BOB)).entries == ("Bob likes rain",)
    (shared,) = await store.origins("memory")
    assert shared.origin == Origin("admin") and shared.text == "House rule: no spoilers"


async def test_each_write_that_changes_the_file_bumps_its_version(
    db: PgDatabase, store: PgMemoryStore
) -> None:
    query = "SELECT version FROM memory_versions WHERE target = 'user' AND user_key = %s"
    await _add(store, ALICE, "Alice likes tea")
    await _add(store, ALICE, "Alice likes jazz")
    assert await _rows(db, query, ALICE) == [(2,)]
    await _add(store, ALICE, "Alice likes tea")  # already there: nothing changes
    assert await _rows(db, query, ALICE) == [(2,)]
    await store.undo("user", ALICE)
    assert await _rows(db, query, ALICE) == [(3,)]


async def test_the_history_is_cut_back_to_its_limit(db: PgDatabase, store: PgMemoryStore) -> None:
    await _add(store, ALICE, "Alice likes tea")
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO memory_history (target, user_key, id, at, action, after, origin_kind)"
            " SELECT 'user', %s, n, 0, 'add', 'old ' || n, 'operator'"
            " FROM generate_series(2, %s) AS n",
            (ALICE, HISTORY_LIMIT + HISTORY_SLACK),
        )
    await _add(store, ALICE, "Alice likes jazz")
    history = await store.history("user", ALICE, None)
    assert len(history) == HISTORY_LIMIT
    assert (
        history[0].after == "Alice likes jazz"
        and history[0].id == HISTORY_LIMIT + HISTORY_SLACK + 1
    )
    origins = await store.origins("user", ALICE)  # the first writer is kept on the row
    assert [(o.text, o.origin.kind) for o in origins] == [
        ("Alice likes tea", "operator"),
        ("Alice likes jazz", "operator"),
    ]
    assert all(o.at is not None for o in origins)


async def test_concurrent_writers_in_one_process_lose_nothing(
    pg_database: str, store: PgMemoryStore
) -> None:
    async with PgDatabase(pg_database, max_size=4) as other_db:
        other = PgMemoryStore(other_db, user_char_limit=200)
        await asyncio.gather(
            *(_add(store, ALICE, f"a{i}") for i in range(10)),
            *(_add(other, ALICE, f"b{i}") for i in range(10)),
        )
    entries = (await store.read("user", ALICE)).entries
    assert sorted(entries) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
    assert [c.id for c in await store.history("user", ALICE, None)] == list(range(20, 0, -1))

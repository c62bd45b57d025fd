"""PgMemoryStore's own guarantees: the fence under the row lock, erasure in one
transaction, versions, the history's trim, records in their transaction."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
import pytest

from memory_core.errors import PersonErasedError
from memory_core.fence import ErasureFence, working
from memory_core.file_memory.edits import Operation
from memory_core.file_memory.ledger import HISTORY_LIMIT, HISTORY_SLACK
from memory_core.file_memory.origin import Origin
from memory_core.file_memory.store import Target
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.memory import PgMemoryStore
from memory_core.pg.memory_schema import MEMORY_MIGRATIONS
from tests.timing import scaled, wait_until_sync

ALICE, BOB = "telegram-1001", "discord-2002"
TABLES = ("memory_versions", "memory_entries", "memory_history", "memory_archive", "person_records")
T = TypeVar("T")


@pytest.fixture
def db(pg_database: str) -> Iterator[PgSyncDatabase]:
    with PgSyncDatabase(pg_database, max_size=4) as database:
        assert database.migrate(MEMORY_MIGRATIONS) == {"memory": 3}
        yield database


@pytest.fixture
def store(db: PgSyncDatabase) -> PgMemoryStore:
    return PgMemoryStore(db, user_char_limit=200, fence=ErasureFence())


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4) as executor:
        yield executor


def _rows(db: PgSyncDatabase, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with db.connection() as conn:
        return conn.execute(query.encode(), params).fetchall()


def _add(store: PgMemoryStore, key: str | None, text: str, origin: Origin | None = None) -> None:
    target: Target = "memory" if key is None else "user"
    store.apply(target, key, [Operation("add", content=text)], origin or Origin("operator"))


def _wait_for_lock_waiters(db: PgSyncDatabase, count: int) -> None:
    """Until `count` backends of this database wait on a row lock (10 s at most)."""
    query = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    wait_until_sync(lambda: _rows(db, query)[0][0] >= count, 10, "a write waiting", interval=0.005)


def _holding_the_row(url: str, key: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(url)
    conn.execute(
        "SELECT 1 FROM memory_versions WHERE target = 'user' AND user_key = %s FOR UPDATE", (key,)
    )
    return conn


def _as_work_begun_now(pool: ThreadPoolExecutor, call: Callable[[], T]) -> Future[T]:
    """Run `call` in a thread as work that began before this returns."""
    with working() as mark:
        pass

    def run() -> T:
        with working(mark):
            return call()

    return pool.submit(run)


def test_a_write_waiting_for_the_lock_when_the_erasure_begins_is_refused(
    pg_database: str, db: PgSyncDatabase, store: PgMemoryStore, pool: ThreadPoolExecutor
) -> None:
    _add(store, ALICE, "Alice likes tea")
    holder = _holding_the_row(pg_database, ALICE)
    try:
        ops = [Operation("add", content="Alice likes jazz")]
        write = _as_work_begun_now(pool, lambda: store.apply("user", ALICE, ops))
        _wait_for_lock_waiters(db, 1)  # it passed the fence's first check
        store.fence.erasing(ALICE)
    finally:
        holder.rollback()
        holder.close()
    with pytest.raises(PersonErasedError):
        write.result(timeout=scaled(10))
    assert store.read("user", ALICE).entries == ("Alice likes tea",)
    assert [c.after for c in store.history("user", ALICE)] == ["Alice likes tea"]


def test_a_record_waiting_for_the_lock_when_the_erasure_begins_is_refused(
    pg_database: str, db: PgSyncDatabase, store: PgMemoryStore, pool: ThreadPoolExecutor
) -> None:
    _add(store, ALICE, "Alice likes tea")
    holder = _holding_the_row(pg_database, ALICE)

    def write_record() -> None:
        with store.person_record(ALICE, "settings.json") as record:
            record.write('{"language": "nb"}')

    try:
        write = _as_work_begun_now(pool, write_record)
        _wait_for_lock_waiters(db, 1)
        store.fence.erasing(ALICE)
    finally:
        holder.rollback()
        holder.close()
    with pytest.raises(PersonErasedError):
        write.result(timeout=scaled(10))
    assert store.peek_record(ALICE, "settings.json") is None


def test_an_erasure_waits_for_a_write_in_progress_and_removes_it_too(
    pg_database: str, db: PgSyncDatabase, store: PgMemoryStore, pool: ThreadPoolExecutor
) -> None:
    _add(store, ALICE, "Alice likes tea")
    holder = _holding_the_row(pg_database, ALICE)
    try:
        holder.execute(
            "INSERT INTO memory_entries (target, user_key, position, text, origin_kind)"
            " VALUES ('user', %s, 1, 'written by the holder', 'person')",
            (ALICE,),
        )
        holder.execute(
            "INSERT INTO person_records VALUES (%s, 'USER.pending.json', '{}')", (ALICE,)
        )
        store.fence.erasing(ALICE)
        erase = pool.submit(store.erase_user, ALICE)
        _wait_for_lock_waiters(db, 1)
        holder.commit()  # the write in progress lands, then the erasure runs
    finally:
        holder.close()
    assert erase.result(timeout=scaled(10)) is True
    for table in TABLES:
        assert _rows(db, f"SELECT * FROM {table} WHERE user_key = %s", ALICE) == []


def test_after_an_erasure_no_table_holds_the_persons_words_or_key(
    db: PgSyncDatabase, store: PgMemoryStore
) -> None:
    _add(store, ALICE, "Alice's secret: she hums Abba", Origin("person", session_id=3))
    _add(store, ALICE, "Review: Alice likes marzipan", Origin("review", session_id=4))
    store.apply("user", ALICE, [Operation("remove", old_text="marzipan")])
    with store.person_record(ALICE, "USER.pending.json") as record:
        record.write('{"changes": ["Abba again"]}')
    _add(store, BOB, "Bob likes rain", Origin("admin", by=ALICE))
    _add(store, None, "House rule: no spoilers", Origin("admin", by=ALICE))
    store.fence.erasing(ALICE)
    assert store.erase_user(ALICE) is True
    for table in TABLES:
        dump = str(_rows(db, f"SELECT * FROM {table}"))
        assert ALICE not in dump and "Abba" not in dump and "marzipan" not in dump
    assert store.read("user", BOB).entries == ("Bob likes rain",)
    (shared,) = store.origins("memory")
    assert shared.origin == Origin("admin") and shared.text == "House rule: no spoilers"
    assert store.user_keys() == [BOB]


def test_a_person_with_only_records_is_erased_too(store: PgMemoryStore) -> None:
    with store.person_record(ALICE, "settings.json") as record:
        record.write("{}")
    assert store.user_keys() == [ALICE]
    assert store.erase_user(ALICE) is True
    assert store.user_keys() == [] and store.record_names(ALICE) == []


def test_a_record_block_that_raises_keeps_nothing(store: PgMemoryStore) -> None:
    with store.person_record(ALICE, "settings.json") as record:
        record.write("first")
    failing = pytest.raises(RuntimeError, match="midway")
    with failing, store.person_record(ALICE, "settings.json") as record:
        record.write("second")
        assert record.read() == "second"  # the block sees its own write
        raise RuntimeError("midway")
    assert store.peek_record(ALICE, "settings.json") == "first"


def test_each_write_that_changes_the_file_bumps_its_version(
    db: PgSyncDatabase, store: PgMemoryStore
) -> None:
    query = "SELECT version FROM memory_versions WHERE target = 'user' AND user_key = %s"
    _add(store, ALICE, "Alice likes tea")
    _add(store, ALICE, "Alice likes jazz")
    assert _rows(db, query, ALICE) == [(2,)]
    _add(store, ALICE, "Alice likes tea")  # already there: nothing changes
    assert _rows(db, query, ALICE) == [(2,)]
    store.undo("user", ALICE)
    assert _rows(db, query, ALICE) == [(3,)]


def test_the_history_is_cut_back_to_its_limit(db: PgSyncDatabase, store: PgMemoryStore) -> None:
    _add(store, ALICE, "Alice likes tea")
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO memory_history (target, user_key, id, at, action, after, origin_kind)"
            " SELECT 'user', %s, n, 0, 'add', 'old ' || n, 'operator'"
            " FROM generate_series(2, %s) AS n",
            (ALICE, HISTORY_LIMIT + HISTORY_SLACK),
        )
    _add(store, ALICE, "Alice likes jazz")
    history = store.history("user", ALICE, None)
    assert len(history) == HISTORY_LIMIT
    assert (
        history[0].after == "Alice likes jazz"
        and history[0].id == HISTORY_LIMIT + HISTORY_SLACK + 1
    )
    origins = store.origins("user", ALICE)  # the first writer is kept on the row
    assert [(o.text, o.origin.kind) for o in origins] == [
        ("Alice likes tea", "operator"),
        ("Alice likes jazz", "operator"),
    ]
    assert all(o.at is not None for o in origins)


def test_concurrent_writers_in_one_process_lose_nothing(
    pg_database: str, store: PgMemoryStore, pool: ThreadPoolExecutor
) -> None:
    with PgSyncDatabase(pg_database, max_size=4) as other_db:
        other = PgMemoryStore(other_db, user_char_limit=200)
        futures = [pool.submit(_add, store, ALICE, f"a{i}") for i in range(10)]
        futures += [pool.submit(_add, other, ALICE, f"b{i}") for i in range(10)]
        for future in futures:
            future.result(timeout=scaled(30))
    entries = store.read("user", ALICE).entries
    assert sorted(entries) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
    assert [c.id for c in store.history("user", ALICE, None)] == list(range(20, 0, -1))

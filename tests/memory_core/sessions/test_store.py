"""Writes (lazy sessions, idempotency, ends, lineage), index sync and the async store."""

from __future__ import annotations

import asyncio
import itertools
import os
import sqlite3
import stat
import threading
import time
from pathlib import Path

import pytest

from memory_core.errors import (
    InvalidMessageError,
    SessionConflictError,
    SessionNotFoundError,
    SessionStoreError,
)
from memory_core.scopes import SearchScope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import NewMessage
from memory_core.sessions.store import SessionStore
from tests.memory_core.sessions.helpers import message, open_db, origin
from tests.timing import scaled


@pytest.fixture
def db(tmp_path: Path):
    with SessionDB(tmp_path / "state.db") as opened:
        yield opened


def fts_ids(db: SessionDB, index: str, text: str) -> set[int]:
    rows = db.conn.execute(
        f"SELECT rowid FROM {index} WHERE {index} MATCH ?", (f'content : "{text}"',)
    )
    return {r[0] for r in rows}


def test_open_makes_a_private_wal_database(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "state.db"
    with SessionDB(path) as db:
        assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_first_message_creates_the_session_lazily(db: SessionDB) -> None:
    assert db.current_session("telegram:private:1:telegram-1") is None
    first = db.append_message(origin=origin(), message=message("hello", 10.0))
    second = db.append_message(origin=origin(), message=message("again", 11.0))
    assert first.session_created and not second.session_created
    assert first.session_id == second.session_id
    info = db.get_session(first.session_id)
    assert info is not None and info.started_at == 10.0 and info.root_id == info.id
    assert db.current_session(info.session_key or "") == info


def test_flushing_the_same_turn_twice_adds_nothing(db: SessionDB) -> None:
    turn = [
        NewMessage("user", "what is the weather", 1.0, platform_message_id="77"),
        NewMessage("assistant", "sunny", 2.0, key="turn-1:1"),
        NewMessage("tool", '{"temp": 21}', 2.5, key="turn-1:2", tool_name="weather"),
    ]
    first = db.append_messages(origin=origin(), messages=turn)
    again = db.append_messages(origin=origin(), messages=turn)
    assert first.inserted == 3 and again.inserted == 0
    assert again.message_ids == first.message_ids
    assert db.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 3
    assert db.conn.execute("SELECT message_count FROM sessions").fetchone()[0] == 3


def test_a_message_needs_an_identity_and_a_valid_role() -> None:
    with pytest.raises(InvalidMessageError, match="stable key"):
        NewMessage("user", "x", 1.0)
    with pytest.raises(InvalidMessageError, match="role"):
        NewMessage("robot", "x", 1.0, key="a")
    with pytest.raises(InvalidMessageError, match="finite"):
        NewMessage("user", "x", float("nan"), key="a")


def test_end_session_then_next_message_starts_a_new_one(db: SessionDB) -> None:
    first = db.append_message(origin=origin(), message=message("one"))
    db.end_session(first.session_id, "new_session")
    db.end_session(first.session_id, "ignored")  # ending twice keeps the first end
    info = db.get_session(first.session_id)
    assert info is not None and info.end_reason == "new_session" and info.ended_at is not None
    second = db.append_message(origin=origin(), message=message("two"))
    assert second.session_created and second.session_id != first.session_id
    with pytest.raises(SessionNotFoundError):
        db.end_session(999, "x")


def test_child_session_continues_the_lineage(db: SessionDB) -> None:
    parent = db.append_message(origin=origin(), message=message("before compression")).session_id
    child = db.start_child_session(parent, end_reason="compression")
    appended = db.append_message(origin=origin(), message=message("after compression"))
    assert appended.session_id == child
    parent_info, child_info = db.get_session(parent), db.get_session(child)
    assert parent_info and parent_info.end_reason == "compression"
    assert child_info and child_info.parent_session_id == parent and child_info.root_id == parent
    grandchild = db.start_child_session(child)
    assert db.get_session(grandchild).root_id == parent  # type: ignore[union-attr]
    texts = [m.content for m in db.get_messages(grandchild, SearchScope("telegram-1"))]
    assert texts == ["before compression", "after compression"]


def test_a_session_key_cannot_switch_owner(db: SessionDB) -> None:
    db.append_message(origin=origin(key="shared-key"), message=message("mine"))
    with pytest.raises(SessionConflictError):
        db.append_message(origin=origin("telegram-2", key="shared-key"), message=message("x"))
    with pytest.raises(sqlite3.IntegrityError, match="owner"):
        db.conn.execute("UPDATE sessions SET user_key = 'telegram-2'")


def test_messages_are_only_read_inside_their_scope(db: SessionDB) -> None:
    sid = db.append_message(origin=origin("telegram-1", "c1"), message=message("secret")).session_id
    assert db.get_messages(sid, SearchScope("telegram-2")) == []
    assert db.get_messages(sid, SearchScope("telegram-1", "other-chat")) == []
    assert [m.content for m in db.get_messages(sid, SearchScope("telegram-1", "c1"))] == ["secret"]


def test_triggers_keep_both_indexes_in_sync(db: SessionDB) -> None:
    result = db.append_messages(
        origin=origin(),
        messages=[message("zebra crossing 🦓🚸🚶", 1.0), message("plain ascii words 斑马线", 2.0)],
    )
    first, second = result.message_ids
    assert fts_ids(db, "messages_fts", "zebra") == {first}
    assert fts_ids(db, "messages_trigram", "🦓🚸🚶") == {first}
    # Rows without emoji stay out of the trigram index (CJK is in the word index).
    assert fts_ids(db, "messages_trigram", "ascii") == set()
    assert fts_ids(db, "messages_trigram", "斑马线") == set()
    db.conn.execute("UPDATE messages SET content = '🦒🦒🦒 giraffe' WHERE id = ?", (first,))
    assert fts_ids(db, "messages_fts", "zebra") == set()
    assert fts_ids(db, "messages_fts", "giraffe") == {first}
    assert fts_ids(db, "messages_trigram", "🦓🚸🚶") == set()
    assert fts_ids(db, "messages_trigram", "🦒🦒🦒") == {first}
    db.conn.execute("UPDATE messages SET role = 'tool' WHERE id = ?", (first,))
    assert fts_ids(db, "messages_trigram", "🦒🦒🦒") == set()
    db.conn.execute("DELETE FROM messages WHERE id = ?", (second,))
    assert fts_ids(db, "messages_fts", "ascii") == set()
    db.check()
    assert db.conn.execute("SELECT message_count FROM sessions").fetchone()[0] == 1


def test_check_detects_an_index_out_of_sync(db: SessionDB) -> None:
    db.append_message(origin=origin(), message=message("indexed"))
    db.conn.execute("DROP TRIGGER messages_ai")
    db.conn.execute(
        "INSERT INTO messages(session_id, role, content, timestamp) VALUES (1, 'user', 'x', 1)"
    )
    with pytest.raises(SessionStoreError, match="out of sync"):
        db.check()


def test_delete_user_removes_sessions_messages_and_index_rows(db: SessionDB) -> None:
    db.append_message(origin=origin("telegram-1"), message=message("alpha 秘密信 🔒🔒🔒"))
    db.append_message(origin=origin("telegram-2"), message=message("alpha other"))
    result = db.delete_user("telegram-1")
    assert (result.sessions, result.messages) == (1, 1)
    assert db.search("alpha", SearchScope("telegram-1")) == []
    assert len(db.search("alpha", SearchScope("telegram-2"))) == 1
    assert fts_ids(db, "messages_trigram", "🔒🔒🔒") == set()
    db.check()


async def test_async_store_round_trip(tmp_path: Path) -> None:
    async with SessionStore(tmp_path / "state.db") as store:
        result = await store.append_message(origin=origin(), message=message("kayak trip"))
        child = await store.start_child_session(result.session_id)
        await store.append_messages(origin=origin(), messages=[message("more kayak")])
        await store.end_session(child, "shutdown")
        hits = await store.search("kayak", SearchScope("telegram-1"))
        assert [h.session_id for h in hits] == [result.session_id]
        assert len(hits[0].snippets) == 2
        assert (await store.get_session(child)).ended_at is not None  # type: ignore[union-attr]
        assert len(await store.get_messages(child, SearchScope("telegram-1"))) == 2
        assert (await store.delete_user("telegram-1")).messages == 2
    with pytest.raises(SessionStoreError, match="not open"):
        await store.search("kayak", SearchScope("telegram-1"))


async def test_a_slow_query_does_not_block_the_event_loop(tmp_path: Path) -> None:
    slow = threading.Event()

    def throttle(conn: sqlite3.Connection) -> None:
        # Every 20 VM steps, sleep 2 ms while `slow` is set: any query crawls.
        conn.set_progress_handler(lambda: time.sleep(0.002) if slow.is_set() else None, 20)

    with open_db(tmp_path) as db:
        for i in range(40):
            db.append_message(origin=origin(), message=message(f"needle {i} " + "hay " * 50))
    async with SessionStore(tmp_path / "state.db", on_connect=throttle) as store:
        ticks: list[float] = []

        async def heartbeat() -> None:
            while True:
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.005)

        beat = asyncio.create_task(heartbeat())
        slow.set()
        started = time.perf_counter()
        hits = await store.search("needle hay", SearchScope("telegram-1"))
        took = time.perf_counter() - started
        slow.clear()
        beat.cancel()
    assert hits and took > 0.1, "the throttle should have made the search slow"
    during = [t for t in ticks if started <= t <= started + took]
    gaps = [b - a for a, b in itertools.pairwise(during)]
    assert len(during) >= 10 and max(gaps) < 0.1


async def test_writes_wait_for_a_locked_database_without_blocking_the_loop(tmp_path: Path) -> None:
    async with SessionStore(tmp_path / "state.db") as store:
        await store.append_message(origin=origin(), message=message("first"))
        other = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        write = asyncio.create_task(store.append_message(origin=origin(), message=message("x")))
        ticks = 0
        for _ in range(20):
            await asyncio.sleep(0.01)
            ticks += 1
        assert not write.done() and ticks == 20
        other.execute("COMMIT")
        other.close()
        assert (await asyncio.wait_for(write, scaled(10))).inserted == 1

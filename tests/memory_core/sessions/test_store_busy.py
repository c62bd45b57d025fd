"""A busy state.db: the store's writes are kept, retried and stored in order, never dropped."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memory_core.errors import SessionStoreBusyError
from memory_core.scopes import SearchScope
from memory_core.sessions import SessionStore, WritePolicy
from tests.memory_core.sessions.helpers import message, origin

ME = SearchScope("telegram-1")
SHORT = WritePolicy(busy_timeout=0.05, wait_timeout=0.3, flush_timeout=5.0)


@contextmanager
def write_lock(path: Path) -> Iterator[sqlite3.Connection]:
    """Another process's write transaction, held until the block ends."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield other
    finally:
        other.execute("COMMIT")
        other.close()


async def texts(store: SessionStore) -> list[str]:
    sessions = await store.list_sessions(ME)
    return [m.content for s in sessions for m in await store.get_messages(s.id, ME)]


async def test_a_message_written_while_locked_is_stored_once_the_lock_frees(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    async with SessionStore(path, writes=SHORT) as store:
        await store.append_message(origin=origin(), message=message("before"))
        with write_lock(path):
            with pytest.raises(SessionStoreBusyError, match="kept and will be stored"):
                await store.append_message(origin=origin(), message=message("during kayak"))
            with pytest.raises(SessionStoreBusyError):
                await store.append_messages(
                    origin=origin(), messages=[message("second"), message("third")]
                )
            assert await texts(store) == ["before"]
        assert await store.flush(10)
        assert await texts(store) == ["before", "during kayak", "second", "third"]
        hits = await store.search("kayak", ME)
        assert len(hits) == 1


async def test_a_later_end_of_session_waits_behind_the_queued_message(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    async with SessionStore(path, writes=SHORT) as store:
        sid = (await store.append_message(origin=origin(), message=message("one"))).session_id
        with write_lock(path):
            with pytest.raises(SessionStoreBusyError):
                await store.append_message(origin=origin(), message=message("two"))
            with pytest.raises(SessionStoreBusyError):
                await store.end_session(sid, "new_session")
        assert await store.flush(10)
        info = await store.get_session(sid)
        assert info is not None and info.end_reason == "new_session"
        assert [m.content for m in await store.get_messages(sid, ME)] == ["one", "two"]


async def test_close_flushes_queued_messages(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SessionStore(path, writes=SHORT)
    await store.open()
    lock = sqlite3.connect(path, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    with pytest.raises(SessionStoreBusyError):
        await store.append_message(origin=origin(), message=message("kept at shutdown"))
    lock.execute("COMMIT")
    lock.close()
    await store.close()
    async with SessionStore(path) as reopened:
        assert await texts(reopened) == ["kept at shutdown"]


async def test_close_gives_up_after_its_flush_timeout_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.db"
    policy = WritePolicy(busy_timeout=0.05, wait_timeout=0.2, flush_timeout=0.3)
    store = SessionStore(path, writes=policy)
    await store.open()
    with write_lock(path):
        with pytest.raises(SessionStoreBusyError):
            await store.append_messages(
                origin=origin(), messages=[message("lost one"), message("lost two")]
            )
        with caplog.at_level(logging.ERROR):
            await store.close()
    assert "2 queued messages were not stored" in caplog.text

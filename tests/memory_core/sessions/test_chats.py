"""Messages left unanswered, and chats that move to a new id."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core.sessions import SessionStore
from tests.memory_core.sessions.helpers import message, origin


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with SessionStore(tmp_path / "state.db", clock=lambda: 5000.0) as opened:
        yield opened


async def test_unanswered_is_an_open_session_whose_newest_message_is_the_persons(
    store: SessionStore,
) -> None:
    waiting = origin("telegram-1")
    answered = origin("telegram-2")
    ended = origin("telegram-3")
    old = origin("telegram-4")
    other = origin("discord-5", source="discord")
    await store.append_messages(origin=waiting, messages=[message("hi?", 1000.0, key="a")])
    await store.append_messages(
        origin=answered, messages=[message("hi", 1000.0), message("hello", 1001.0, "assistant")]
    )
    gone = await store.append_messages(origin=ended, messages=[message("bye", 1000.0)])
    await store.end_session(gone.session_id, "new")
    await store.append_messages(origin=old, messages=[message("long ago", 10.0)])
    await store.append_messages(origin=other, messages=[message("hey", 1000.0)])

    found = await store.unanswered("telegram", since=500.0)
    assert [(info.user_key, m.content, m.role) for info, m in found] == [
        ("telegram-1", "hi?", "user")
    ]


async def test_a_migrated_chat_takes_its_sessions_and_keys_along(store: SessionStore) -> None:
    where = origin("telegram-1", "-100", chat_type="group")
    first = await store.append_messages(origin=where, messages=[message("in the group")])
    await store.end_session(first.session_id, "new")
    second = await store.append_messages(origin=where, messages=[message("again")])

    assert await store.migrate_chat("telegram", "-100", "-200") == 2
    moved = await store.current_session("telegram:group:-200:telegram-1")
    assert moved is not None and moved.id == second.session_id and moved.chat_id == "-200"
    assert await store.current_session("telegram:group:-100:telegram-1") is None
    earlier = await store.get_session(first.session_id)
    assert earlier is not None and earlier.chat_id == "-200"


async def test_a_migration_that_meets_an_open_session_ends_the_old_one(
    store: SessionStore,
) -> None:
    before = origin("telegram-1", "-100", chat_type="group")
    after = origin("telegram-1", "-200", chat_type="group")
    old = await store.append_messages(origin=before, messages=[message("old group")])
    new = await store.append_messages(origin=after, messages=[message("new group")])

    await store.migrate_chat("telegram", "-100", "-200")
    current = await store.current_session("telegram:group:-200:telegram-1")
    ended = await store.get_session(old.session_id)
    assert current is not None and current.id == new.session_id
    assert ended is not None and ended.end_reason == "migrated" and ended.chat_id == "-200"
    assert [e.session_id for e in await store.pending_extractions()] == [old.session_id]

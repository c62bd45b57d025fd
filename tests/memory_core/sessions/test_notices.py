"""A fault line kept on a person's message counts as its answer; text UTF-8 cannot
hold is kept with U+FFFD in its place."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core import SearchScope
from memory_core.sessions import SessionStore
from tests.memory_core.sessions.helpers import message, origin


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with SessionStore(tmp_path / "state.db", clock=lambda: 5000.0) as opened:
        yield opened


async def test_a_message_with_a_notice_is_not_unanswered(store: SessionStore) -> None:
    failed = await store.append_messages(
        origin=origin("telegram-1"), messages=[message("hi?", 1000.0, key="a")]
    )
    await store.append_messages(
        origin=origin("telegram-2"), messages=[message("still there?", 1000.0, key="b")]
    )
    assert await store.record_notice(failed.message_ids[0], "(the model is not answering)")
    found = await store.unanswered("telegram", since=500.0)
    assert [(info.user_key, m.content) for info, m in found] == [("telegram-2", "still there?")]


async def test_a_later_message_without_a_notice_is_unanswered_again(store: SessionStore) -> None:
    who = origin("telegram-1")
    failed = await store.append_messages(origin=who, messages=[message("hi?", 1000.0, key="a")])
    await store.record_notice(failed.message_ids[0], "(the model is not answering)")
    await store.append_messages(origin=who, messages=[message("hello?", 1001.0, key="b")])
    found = await store.unanswered("telegram", since=500.0)
    assert [m.content for _, m in found] == ["hello?"]


async def test_only_a_persons_message_takes_a_notice(store: SessionStore) -> None:
    done = await store.append_messages(
        origin=origin("telegram-1"),
        messages=[message("hi", 1000.0, key="a"), message("hello", 1001.0, "assistant", key="b")],
    )
    assert not await store.record_notice(done.message_ids[1], "(line)")
    assert not await store.record_notice(10_000, "(line)")  # no such message


async def test_lone_surrogates_are_stored_as_replacement_characters(store: SessionStore) -> None:
    who = origin("telegram-1")
    written = await store.append_messages(
        origin=who,
        messages=[message("a\ud800b \udfff", 1000.0, key="a", speaker_name="X\udc00")],
    )
    kept = await store.get_messages(written.session_id, SearchScope("telegram-1"))
    assert [(m.content, m.speaker_name) for m in kept] == [("a\ufffdb \ufffd", "X\ufffd")]

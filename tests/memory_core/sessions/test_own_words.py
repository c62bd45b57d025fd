"""messages.own_words: a forwarded message is stored, and read back, as not the
speaker's own words; everything else is their own."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core import recall_scope
from memory_core.sessions import SessionStore
from tests.memory_core.sessions.helpers import message, origin


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with SessionStore(tmp_path / "state.db", clock=lambda: 5000.0) as opened:
        yield opened


async def test_own_words_is_stored_and_read_back(store: SessionStore, tmp_path: Path) -> None:
    written = await store.append_messages(
        origin=origin("telegram-1"),
        messages=[
            message("I'm allergic to peanuts", 1000.0, own_words=False),
            message("forwarded?", 1001.0, "assistant"),
            message("yes, from Dana", 1002.0),
        ],
    )
    scope = recall_scope("telegram-1", "telegram-1", "private")
    read = await store.get_messages(written.session_id, scope)
    assert [(m.content, m.own_words) for m in read] == [
        ("I'm allergic to peanuts", False),
        ("forwarded?", True),
        ("yes, from Dana", True),
    ]
    assert all(isinstance(m.own_words, bool) for m in read)
    with sqlite3.connect(tmp_path / "state.db") as conn:
        column = conn.execute("SELECT own_words FROM messages ORDER BY id").fetchall()
    assert column == [(0,), (1,), (1,)]


async def test_an_unanswered_forward_keeps_its_mark(store: SessionStore) -> None:
    """The message a restart answers is read with the same columns."""
    await store.append_messages(
        origin=origin("telegram-2"), messages=[message("from a friend", 1000.0, own_words=False)]
    )
    [(_, waiting)] = await store.unanswered("telegram", since=500.0)
    assert (waiting.content, waiting.own_words) == ("from a friend", False)

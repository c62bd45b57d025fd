"""`SessionStore.active_sessions`: the conversations of a scope active in a window."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core.scopes import recall_scope
from memory_core.sessions.models import SearchOptions
from memory_core.sessions.store import SessionStore
from tests.memory_core.sessions.helpers import message, origin

DAY = 86_400.0


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with SessionStore(tmp_path / "state.db") as opened:
        yield opened


async def talk(
    store: SessionStore, at: float, *, user: str = "telegram-1", end: bool = True, **where: object
) -> int:
    key = f"k:{user}:{at}:{where}"
    result = await store.append_messages(
        origin=origin(user, key=key, **where),  # type: ignore[arg-type]
        messages=[message("hello", at), message("hi", at + 60, role="assistant")],
    )
    if end:
        await store.end_session(result.session_id, "new")
    return result.session_id


async def test_only_conversations_with_messages_inside_the_window_latest_first(
    store: SessionStore,
) -> None:
    before = await talk(store, 10 * DAY)
    first = await talk(store, 20 * DAY)
    second = await talk(store, 21 * DAY)
    after = await talk(store, 30 * DAY)
    scope = recall_scope("telegram-1", "telegram-1", "private")
    found, total = await store.active_sessions(scope, SearchOptions(since=15 * DAY, until=25 * DAY))
    assert [a.session_id for a in found] == [second, first] and total == 2
    assert {before, after}.isdisjoint(a.session_id for a in found)
    assert found[0].first_at == 21 * DAY and found[0].last_at == 21 * DAY + 60
    assert found[0].messages == 2 and found[0].source == "telegram"


async def test_the_scope_filter_of_the_search_applies(store: SessionStore) -> None:
    mine = await talk(store, 20 * DAY)
    group = await talk(store, 20 * DAY + 5, chat="-100", chat_type="group")
    await talk(store, 20 * DAY, user="telegram-2")  # another person
    await talk(store, 20 * DAY, source="review")  # an internal background session
    current = await talk(store, 20 * DAY + 9, end=False)
    window = SearchOptions(since=0, until=30 * DAY, exclude_lineage_of=current)
    private = recall_scope("telegram-1", "telegram-1", "private")
    found, _ = await store.active_sessions(private, window)
    assert [a.session_id for a in found] == [group, mine]  # a private chat sees the groups
    in_group = recall_scope("telegram-1", "-100", "group")
    found, _ = await store.active_sessions(in_group, window)
    assert [a.session_id for a in found] == [group]


async def test_a_limit_keeps_the_latest_and_counts_them_all(store: SessionStore) -> None:
    ids = [await talk(store, (20 + i) * DAY) for i in range(5)]
    scope = recall_scope("telegram-1", "telegram-1", "private")
    found, total = await store.active_sessions(scope, SearchOptions(since=0, limit=2))
    assert [a.session_id for a in found] == [ids[4], ids[3]] and total == 5


async def test_a_compressed_conversation_counts_once_under_its_root(store: SessionStore) -> None:
    root = await talk(store, 20 * DAY, end=False)
    await store.start_child_session(root, messages=[message("more", 20 * DAY + 600)])
    scope = recall_scope("telegram-1", "telegram-1", "private")
    found, total = await store.active_sessions(scope, SearchOptions(since=0))
    assert [a.session_id for a in found] == [root] and total == 1
    assert found[0].messages == 3 and found[0].last_at == 20 * DAY + 600

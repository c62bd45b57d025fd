"""The built-in history recall provider, against a real session store."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from memory_core.context import wrap_memory_context
from memory_core.errors import ProviderError
from memory_core.providers.base import SessionContext
from memory_core.providers.history import HistoryRecallProvider, meaningful_terms
from memory_core.providers.manager import MemoryManager
from memory_core.providers.registry import ProviderResources, default_registry
from memory_core.sessions.models import NewMessage, SessionOrigin
from memory_core.sessions.store import SessionStore

DAY = 86400.0
NOW = time.time()
ME = "telegram-1"
SOMEONE_ELSE = "telegram-2"
GROUP = "-100500"

SMALL_TALK = [
    "hi",
    "thanks!",
    "how are you?",
    "ok cool",
    "Good morning :)",
    "haha nice, thank you so much",
    "hey, what's up?",
    "yes please",
    "谢谢",
    "你好吗？",
    "ありがとうございます",
]


def _origin(user: str, chat: str, key: str, chat_type: str = "private") -> SessionOrigin:
    return SessionOrigin(
        session_key=key, source="telegram", user_key=user, chat_id=chat, chat_type=chat_type
    )


async def _conversation(
    store: SessionStore, origin: SessionOrigin, turns: Sequence[tuple[str, str]], at: float
) -> int:
    messages = [
        NewMessage(role=role, content=text, timestamp=at + i * 60, key=f"{origin.session_key}:{i}")
        for i, (role, text) in enumerate(turns)
    ]
    result = await store.append_messages(origin=origin, messages=messages)
    return result.session_id


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with SessionStore(tmp_path / "state.db") as opened:
        yield opened


@pytest.fixture
async def history(store: SessionStore) -> dict[str, int]:
    return await build_history(store)


async def build_history(store: SessionStore) -> dict[str, int]:
    """Several of my past conversations, someone else's, a group, and my current session."""
    ids: dict[str, int] = {}
    me = _origin(ME, "1", "telegram:private:1")
    ids["deploy"] = await _conversation(
        store,
        me,
        [
            ("user", "The deploy of v2.3 broke checkout for some users. Should we roll back?"),
            (
                "assistant",
                "Yes: do the rollback to v2.2 now and pin it until the payment fix lands.",
            ),
            ("user", "Agreed. Rollback plan: pin v2.2, redeploy v2.3 on Monday after the fix."),
        ],
        NOW - 8 * DAY,
    )
    await store.end_session(ids["deploy"], "new")
    for n, (topic, when) in enumerate(
        [
            (("user", "hi! how are you today?"), 6),
            (("user", "Can you give me a recipe for lemon risotto? I have arborio rice."), 5),
            (("user", "thanks, ok cool, good night"), 4),
            (("user", "My checkout page colour looks odd in dark mode."), 3),
        ]
    ):
        sid = await _conversation(store, me, [topic, ("assistant", "Sure.")], NOW - when * DAY)
        await store.end_session(sid, "new")
        ids[f"other{n}"] = sid
    ids["zh"] = await _conversation(
        store,
        _origin(ME, "1", "telegram:private:1:zh"),
        [("user", "部署回滚的计划：先固定2.2版本，周一再发布。")],
        NOW - 3 * DAY,
    )
    await store.end_session(ids["zh"], "new")
    elsewhere = _origin(SOMEONE_ELSE, "2", "telegram:private:2")
    ids["secret"] = await _conversation(
        store,
        elsewhere,
        [("user", "Our deploy rollback failed; the ORCHID database password leaked.")],
        NOW - 7 * DAY,
    )
    group = _origin(ME, GROUP, f"telegram:group:{GROUP}:1", "group")
    ids["group"] = await _conversation(
        store,
        group,
        [("user", "In this group we decided the deploy rollback happens via the GROUPBOT job.")],
        NOW - 2 * DAY,
    )
    await store.end_session(ids["group"], "new")
    ids["current"] = await _conversation(
        store, me, [("user", "CURRENTSESSION: talk about the deploy rollback again later")], NOW
    )
    return ids


async def _provider(
    store: SessionStore, session_id: int, *, chat_id: str = "1", chat_type: str = "private"
) -> HistoryRecallProvider:
    provider = HistoryRecallProvider(store)
    await provider.initialize(
        SessionContext(
            session_id=session_id,
            user_key=ME,
            platform="telegram",
            chat_id=chat_id,
            chat_type=chat_type,
        )
    )
    return provider


def test_meaningful_terms_drop_small_talk_and_recall_words() -> None:
    for text in SMALL_TALK:
        assert meaningful_terms(text) == [], text
    assert meaningful_terms("What did we decide about the deploy rollback last week?") == [
        "decide",
        "deploy",
        "rollback",
    ]
    assert meaningful_terms("部署回滚") == ["部署回滚"]


async def test_small_talk_recalls_nothing(store: SessionStore, history: dict[str, int]) -> None:
    provider = await _provider(store, history["current"])
    for text in SMALL_TALK:
        assert await provider.prefetch(text) == "", text


async def test_a_real_reference_recalls_the_earlier_conversation_with_its_date(
    store: SessionStore, history: dict[str, int]
) -> None:
    provider = await _provider(store, history["current"])
    recall = await provider.prefetch("what did we decide about the deploy rollback last week?")
    date = time.strftime("%Y-%m-%d", time.gmtime(NOW - 8 * DAY))
    assert f"- {date}: " in recall
    assert "v2.2" in recall
    assert not re.search(r">>>|<<<", recall)  # match markers are removed
    # a direct chat sees my own sessions in groups too, but never someone else's,
    # and never the current session
    assert "ORCHID" not in recall
    assert "CURRENTSESSION" not in recall


async def test_a_single_shared_word_is_not_enough(
    store: SessionStore, history: dict[str, int]
) -> None:
    """Only "checkout" links this to the deploy talk; only "colour"/"page" to another."""
    provider = await _provider(store, history["current"])
    assert await provider.prefetch("Is checkout still failing for everyone?") == ""
    recall = await provider.prefetch("what was wrong with the checkout page colour?")
    assert "dark mode" in recall
    assert "v2.2" not in recall


async def test_a_one_word_topic_recalls_when_that_word_matches(
    store: SessionStore, history: dict[str, int]
) -> None:
    provider = await _provider(store, history["current"])
    assert "arborio" in await provider.prefetch("risotto?")


async def test_chinese_text_is_recalled_through_the_trigram_index(
    store: SessionStore, history: dict[str, int]
) -> None:
    provider = await _provider(store, history["current"])
    assert "周一再发布" in await provider.prefetch("上周我们说的部署回滚是什么？")
    assert await provider.prefetch("天气怎么样") == ""


async def test_inside_a_group_only_that_groups_sessions_are_searched(
    store: SessionStore, history: dict[str, int]
) -> None:
    provider = await _provider(store, history["current"], chat_id=GROUP, chat_type="group")
    recall = await provider.prefetch("how does the deploy rollback work?")
    assert "GROUPBOT" in recall
    assert "v2.2" not in recall  # that was a direct chat


async def test_through_the_registry_and_manager(
    store: SessionStore, history: dict[str, int], tmp_path: Path
) -> None:
    registry = default_registry()
    builtins, external = registry.create_selected(
        ProviderResources(home=tmp_path, sessions=store), builtins=["history"], external=None
    )
    manager = MemoryManager(builtins, external=external)
    await manager.initialize(
        SessionContext(
            session_id=history["current"],
            user_key=ME,
            platform="telegram",
            chat_id="1",
            chat_type="private",
        )
    )
    assert await manager.prefetch_all("thanks!") == ""
    recalled = await manager.prefetch_all("remind me of the rollback plan for the deploy")
    block = wrap_memory_context(recalled)
    assert block.startswith("<memory-context>\n[System note:")
    assert "pin v2.2" in block
    await manager.shutdown()


def test_a_session_context_takes_only_the_chat_types_the_store_takes() -> None:
    for chat_type in ("dm", "direct", "channel"):
        with pytest.raises(ProviderError, match="chat type"):
            SessionContext(
                session_id=1,
                user_key=ME,
                platform="telegram",
                chat_id="1",
                chat_type=chat_type,  # type: ignore[arg-type]
            )

"""The built-in history recall provider, against a real session store."""

from __future__ import annotations

import asyncio
import random
import re
import string
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from memory_core.context import wrap_memory_context
from memory_core.errors import ProviderError
from memory_core.providers.base import SessionContext
from memory_core.providers.history import (
    PREFETCH_MAX_HITS,
    PREFETCH_SNIPPETS,
    HistoryRecallProvider,
    meaningful_terms,
)
from memory_core.providers.manager import MemoryManager
from memory_core.providers.registry import ProviderResources, default_registry
from memory_core.scopes import SearchScope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import (
    DEFAULT_SEARCH_OPTIONS,
    NewMessage,
    SearchOptions,
    SessionHit,
    SessionOrigin,
)
from memory_core.sessions.query import MAX_QUERY_CHARS, MAX_TERMS
from memory_core.sessions.store import SessionStore
from tests.memory_core.sessions.test_store_reads import SlowSteps, wait_until
from tests.timing import scaled

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


def _pasted_book(words: int = 40_000) -> str:
    rng = random.Random(5)
    filler = (("".join(rng.choices(string.ascii_lowercase, k=8))) for _ in range(words))
    return "the deploy rollback plan, again: " + " ".join(filler)


class RecordingSearcher:
    """A session searcher that finds nothing and keeps the queries and options it was given."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.options: list[SearchOptions] = []

    async def search(
        self, query: str, scope: SearchScope, options: SearchOptions = DEFAULT_SEARCH_OPTIONS
    ) -> list[SessionHit]:
        self.queries.append(query)
        self.options.append(options)
        return []


async def test_prefetch_asks_for_fewer_hits_per_word_than_recall() -> None:
    searcher = RecordingSearcher()
    tuned = HistoryRecallProvider(searcher, max_hits_per_term=50, search_snippets=1)
    for provider in (HistoryRecallProvider(searcher), tuned):
        await provider.initialize(SessionContext(7, ME, "telegram", "1", "private"))
        await provider.prefetch("the deploy rollback plan")
    default, chosen = searcher.options
    assert default.max_hits_per_term == PREFETCH_MAX_HITS
    assert DEFAULT_SEARCH_OPTIONS.max_hits_per_term > PREFETCH_MAX_HITS  # /recall's
    assert default.snippets_per_hit == PREFETCH_SNIPPETS
    assert (default.limit, default.exclude_lineage_of) == (4, 7)
    assert (chosen.max_hits_per_term, chosen.snippets_per_hit) == (50, 1)


def test_word_extraction_keeps_the_first_words_and_no_more_than_a_search_uses() -> None:
    terms = meaningful_terms(_pasted_book())
    assert terms[:3] == ["deploy", "rollback", "plan"]
    assert len(terms) == MAX_TERMS


async def test_a_pasted_book_becomes_a_bounded_search() -> None:
    searcher = RecordingSearcher()
    provider = HistoryRecallProvider(searcher)
    await provider.initialize(SessionContext(1, ME, "telegram", "1", "private"))
    assert await provider.prefetch(_pasted_book()) == ""
    [query] = searcher.queries
    assert query.startswith("deploy rollback plan ") and len(query) <= MAX_QUERY_CHARS


async def test_a_40000_word_message_is_recalled_in_time_and_the_loop_keeps_running(
    store: SessionStore, history: dict[str, int]
) -> None:
    manager = MemoryManager([HistoryRecallProvider(store)], prefetch_timeout=2.0)
    await manager.initialize(SessionContext(history["current"], ME, "telegram", "1", "private"))
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:  # measures how long the loop was kept from other work
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.01)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()

    ticking = asyncio.create_task(ticker())
    async with asyncio.timeout(scaled(5.0)):
        recalled = await manager.prefetch_all(_pasted_book())
    done.set()
    await ticking
    assert "pin v2.2" in recalled
    assert gaps and max(gaps) < 1.0  # before: the loop stood still for 10 s and more
    await manager.shutdown()


async def test_a_recall_cut_by_the_prefetch_timeout_frees_the_reader(
    tmp_path: Path, history: dict[str, int]
) -> None:
    """The store's `on_connect` makes every statement slow, a big search seconds (SlowSteps)."""
    path = tmp_path / "slow.db"
    with SessionDB(path) as db:
        rows = [NewMessage("user", f"天气 {i}", NOW - DAY + i, key=f"w{i}") for i in range(5000)]
        db.append_messages(origin=_origin(ME, "1", "telegram:private:1:w"), messages=rows)
    slow = SlowSteps()
    async with SessionStore(path, readers=1, on_connect=slow.install) as slow_store:
        manager = MemoryManager([HistoryRecallProvider(slow_store)], prefetch_timeout=0.3)
        await manager.initialize(SessionContext(99, ME, "telegram", "1", "private"))
        async with asyncio.timeout(scaled(5.0)):
            assert await manager.prefetch_all("天气") == ""  # timed out, skipped
        assert slow.entered
        await wait_until(lambda: not slow.inside, timeout=5.0)  # the 10 s search was stopped
        async with asyncio.timeout(scaled(5.0)):  # and the only reader answers the next turn
            assert await slow_store.search("report", SearchScope(ME)) == []
        await manager.shutdown()

"""Compression end to end: `Conversations.handle` against two fake model servers.

The main model and the auxiliary model are separate fakes, so a summary
request (non-streamed, to the auxiliary) never takes a reply scripted for the
conversation. `llm.context_chars` is 20,000 here: the tool schemas and the
system prompt alone take about 7,000, and compression needs room for a tail.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.agent.compression import NO_SUMMARY_NOTE, SUMMARY_PREFIX
from gateway.app import Services, open_services
from gateway.config import load_config
from gateway.conversation import Conversations
from memory_core import SearchOptions, SearchScope, SessionInfo, StoredMessage
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall
from tests.gateway.serving import serving
from tests.gateway.test_conversation import SKILLS, ListSink, message
from tests.timing import scaled

BUDGET = 20_000
USER = SearchScope(user_key="telegram-42")


@dataclass
class Bot:
    main: FakeOpenAI
    aux: FakeOpenAI
    services: Services
    conversations: Conversations
    sink: ListSink

    async def say(self, text: str) -> str:
        await self.conversations.handle(message(text), self.sink)
        return self.sink.replies[-1]

    async def sessions(self) -> list[SessionInfo]:
        """Every session of the person, oldest first (roots and children)."""
        found: dict[int, SessionInfo] = {}
        for root in await self.services.sessions.list_sessions(USER, limit=100):
            for m in await self.services.sessions.get_messages(root.id, USER):
                info = await self.services.sessions.get_session(m.session_id)
                assert info is not None
                found[info.id] = info
        return [found[i] for i in sorted(found)]

    async def messages(self, session_id: int) -> list[StoredMessage]:
        return await self.services.sessions.get_messages(session_id, USER, lineage=False)

    def main_chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.main.requests if r.path.endswith("/chat/completions")]


@asynccontextmanager
async def two_model_services(
    tmp_path: Path, main: FakeOpenAI, aux: FakeOpenAI
) -> AsyncIterator[Services]:
    """The bot's services with `BUDGET` context characters, the main model on `main` and
    the auxiliary one (summaries) on `aux`."""
    config_file = tmp_path / "mnemo.yaml"
    config_file.write_text(
        f"llm:\n  context_chars: {BUDGET}\n  timeout: {scaled(5.0)}\n"
        f"auxiliary:\n  base_url: {aux.url}/v1\n",
        encoding="utf-8",
    )
    env = {
        "OPENAI_BASE_URL": main.url + "/v1",
        "MNEMO_HOME": str(tmp_path / "data"),
        "MNEMO_SKILLS_DIR": str(SKILLS),
    }
    async with open_services(load_config(config_file, environ=env)) as services:
        yield services


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with (
        FakeOpenAI(chunk_size=500) as main,
        FakeOpenAI() as aux,
        two_model_services(tmp_path, main, aux) as services,
    ):
        conversations = serving(services)
        yield Bot(main, aux, services, conversations, ListSink())
        await conversations.close()


def _padded(text: str, size: int) -> str:
    return (text + " " + "lorem ipsum " * size)[:size]


def _turn_with_a_tool(bot: Bot, n: int, reply_size: int = 1500) -> None:
    """Script one turn: a skills_list call (id ``call_<n>``), then a long reply."""
    bot.main.call_tools(ToolCall("skills_list", {}, id=f"call_{n}"))
    bot.main.say(_padded(f"reply {n}", reply_size))


async def _grow_until_compressed(bot: Bot, limit: int = 12) -> int:
    """Send long messages (each turn with a tool pair) until a summary is asked for."""
    for n in range(2, limit):
        _turn_with_a_tool(bot, n)
        await bot.say(_padded(f"message {n}: the number of the day is {n * 111}", 1500))
        if bot.aux.requests:
            return n
    raise AssertionError("the session never compressed")


def _assert_paired(messages: list[dict[str, Any]]) -> None:
    """Every tool result follows its assistant tool_calls message, and every call is answered."""
    open_calls: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls, f"orphan tool result {m['tool_call_id']}"
            open_calls.discard(m["tool_call_id"])
            continue
        assert not open_calls, f"unanswered tool calls {open_calls}"
        open_calls = {c["id"] for c in m.get("tool_calls") or []}
    assert not open_calls


async def test_a_long_session_continues_in_a_compressed_child(bot: Bot) -> None:
    bot.aux.say("The person likes tea. The number of the day was 222. Nothing is open.")
    bot.main.call_tools(
        ToolCall("memory", {"target": "user", "action": "add", "content": "Drinks green tea"})
    )
    bot.main.say("Noted.")
    await bot.say("I drink green tea, remember that. The secret word is PLATYPUS.")
    at = await _grow_until_compressed(bot)
    assert bot.sink.replies[-1].startswith(f"reply {at}")  # the turn was answered normally

    summary_call = bot.aux.requests[0].body
    assert not summary_call.get("stream")
    summarised = json.dumps(summary_call["messages"])
    assert "PLATYPUS" in summarised and "message 2" in summarised  # the older part

    parent, child = await bot.sessions()
    assert parent.end_reason == "compression" and parent.ended_at is not None
    assert child.parent_session_id == parent.id and child.root_id == parent.root_id
    assert child.ended_at is None

    stored = await bot.messages(child.id)
    assert stored[0].role == "user" and stored[0].content.startswith(SUMMARY_PREFIX)
    assert "number of the day was 222" in stored[0].content
    # the model's summary is not the person's words (a review may not learn from it)
    assert not stored[0].own_words and all(m.own_words for m in stored[1:])
    # the parent's extraction covers what the child copied from it; the turn's reply is new
    pending = await bot.services.sessions.pending_extractions()
    assert [entry.session_id for entry in pending] == [parent.id]
    copied_through = [m.id for m in stored if m.role == "user"][-1]
    assert await bot.services.sessions.extraction_progress(child.id) == copied_through
    assert stored[-1].id > copied_through
    assert any(m.role == "tool" for m in stored)  # a tool pair was kept in the tail
    assert stored[-1].content.startswith(f"reply {at}")
    parent_texts = [m.content for m in await bot.messages(parent.id)]
    assert all(m.content in parent_texts for m in stored[1:-3])  # the tail: copies
    assert "PLATYPUS" in parent_texts[0]  # the parent keeps everything

    requests = bot.main_chat_requests()
    compressed = requests[-2]["messages"]  # this turn: the tool call, then the reply
    before = requests[-3]["messages"]
    assert compressed[1]["content"].startswith(SUMMARY_PREFIX)
    assert "Drinks green tea" not in before[0]["content"]  # the parent's frozen prompt
    assert "Drinks green tea" in compressed[0]["content"]  # a fresh snapshot
    assert len(json.dumps(compressed)) < len(json.dumps(before))
    _assert_paired(compressed[1:])

    _turn_with_a_tool(bot, 99, reply_size=100)
    assert (await bot.say("and now?")).startswith("reply 99")
    after = bot.main_chat_requests()[-2]["messages"]
    assert after[0] == compressed[0]  # the child's prompt stays put
    assert after[1]["content"] == compressed[1]["content"]
    assert len(await bot.sessions()) == 2  # no second compression
    _assert_paired(after[1:])


async def test_the_parent_stays_findable_from_a_later_conversation(bot: Bot) -> None:
    bot.aux.say("Small talk about tea.")  # the summary leaves the secret word out
    bot.main.say("Noted.")
    await bot.say("The secret word is PLATYPUS.")
    await _grow_until_compressed(bot)
    parent, child = await bot.sessions()
    inside = await bot.services.sessions.search(
        "PLATYPUS", USER, SearchOptions(exclude_lineage_of=child.id)
    )
    assert inside == []  # recall from the child skips its own lineage, parent included
    hits = await bot.services.sessions.search("PLATYPUS", USER)
    assert [h.session_id for h in hits] == [parent.root_id]  # a child resolves to its root
    bot.main.say("fresh")
    await bot.conversations.handle(message("/new"), bot.sink)
    await bot.say("Do you remember PLATYPUS?")
    recalled = bot.main_chat_requests()[-1]["messages"][-1]["content"]
    assert "<memory-context>" in recalled and "PLATYPUS" in recalled.split("<memory-context>")[1]
    later = (await bot.sessions())[-1]
    assert later.root_id != parent.root_id
    hits = await bot.services.sessions.search(
        "PLATYPUS", USER, SearchOptions(exclude_lineage_of=later.id)
    )
    assert [h.session_id for h in hits] == [parent.root_id]


async def test_a_failing_summary_loses_nothing_and_the_next_turn_works(bot: Bot) -> None:
    bot.aux.fail_next(Fault.http(400))  # not retried
    bot.main.say("Noted.")
    await bot.say("The secret word is PLATYPUS.")
    at = await _grow_until_compressed(bot)
    assert bot.sink.replies[-1].startswith(f"reply {at}")  # answered, uncompressed
    [session] = await bot.sessions()
    assert session.ended_at is None
    stored = await bot.messages(session.id)
    assert len(stored) == 2 + (at - 1) * 4  # user, tool call, tool result, reply per turn
    assert "PLATYPUS" in json.dumps(bot.main_chat_requests()[-1]["messages"])

    bot.aux.say("Tea, PLATYPUS, numbers.")  # the next turn tries again, and succeeds
    _turn_with_a_tool(bot, 50, reply_size=100)
    assert (await bot.say("still there?")).startswith("reply 50")
    parent, child = await bot.sessions()
    assert parent.end_reason == "compression" and child.parent_session_id == parent.id


async def test_a_failing_summary_over_the_whole_budget_keeps_the_tail_with_a_note(
    bot: Bot,
) -> None:
    # The auxiliary fake has nothing scripted: every summary call fails (HTTP 500).
    bot.main.say("Noted.")
    await bot.say("The secret word is PLATYPUS.")
    for n in range(2, 8):  # each message is cut to 4,000 characters in the request
        bot.main.say(_padded(f"reply {n}", 6000))
        assert await bot.say(_padded(f"message {n}", 6000)) == _padded(f"reply {n}", 6000)
        if len(await bot.sessions()) > 1:
            break
    assert bot.aux.requests  # a summary was asked for, and failed
    parent, child = await bot.sessions()
    assert parent.end_reason == "compression" and child.parent_session_id == parent.id
    stored = await bot.messages(child.id)
    assert stored[0].content == NO_SUMMARY_NOTE
    assert stored[-2].content == _padded(f"message {n}", 6000)  # whole in the store
    assert "PLATYPUS" in (await bot.messages(parent.id))[0].content
    last = bot.main_chat_requests()[-1]["messages"]
    assert len(json.dumps(last)) < BUDGET
    bot.main.say("still here")
    assert await bot.say("and now?") == "still here"


async def test_a_1mb_reply_is_kept_whole_and_cut_in_every_request(bot: Bot) -> None:
    huge = _padded("the huge reply", 1_000_000)
    bot.main.say(huge)
    await bot.say("write me a lot")
    bot.aux.say("The person asked for a lot of text and got it.")
    for n in range(2, 8):
        bot.main.say(_padded(f"reply {n}", 1500))
        await bot.say(_padded(f"message {n}", 1500))
    for body in [*bot.main_chat_requests()[1:], *(r.body for r in bot.aux.requests)]:
        assert len(json.dumps(body)) < BUDGET * 1.2  # never the megabyte
    sessions = await bot.sessions()
    assert [m.content for m in await bot.messages(sessions[0].id)][1] == huge


async def test_streams_cut_mid_tool_call_lose_nothing_and_compression_still_works(
    bot: Bot,
) -> None:
    bot.aux.say("Summary of the early talk.")
    sent: list[str] = []
    for n in range(1, 12):  # every reply breaks off inside its tool call
        bot.main.call_tools(ToolCall("skills_list", {}, id=f"c{n}"), fault=Fault.cut(after=2))
        sent.append(_padded(f"message {n}", 3000))
        assert await bot.say(sent[-1]) != ""  # a short line, never silence
        if bot.aux.requests:
            break
    assert bot.aux.requests, "the session never compressed"
    bot.main.say("back again")
    assert await bot.say("hello?") == "back again"
    parent, child = await bot.sessions()
    assert parent.end_reason == "compression" and child.parent_session_id == parent.id
    assert [m.content for m in await bot.messages(parent.id)] == sent
    kept = [m.content for m in await bot.messages(child.id)]
    assert kept[-3:] == [sent[-1], "hello?", "back again"]

"""`session_search` end to end: `Conversations.handle`, the fake model, real state.db.

The fake serves requests in order from one queue: the streamed turn that calls
the tool, then the non-streamed recap request(s), then the streamed answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Services, open_services
from gateway.conversation import Conversations
from gateway.messages import InboundMessage
from memory_core import SearchScope
from tests.fakes.openai import FakeOpenAI, Fault, RecordedRequest, ToolCall, Turn
from tests.gateway.serving import config_for, serving
from tests.gateway.sinks import ListSink
from tests.timing import scaled


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(chunk_size=7) as server:
        yield server


@pytest.fixture
async def services(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    config = config_for(fake.url, tmp_path / "data", recap_timeout=scaled(1.0))
    async with open_services(config) as opened:
        yield opened


def message(
    text: str, user: str = "42", chat: str | None = None, chat_type: str = "private"
) -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id=chat or user,
        chat_type=chat_type,  # type: ignore[arg-type]
        user_id=user,
        text=text,
    )


async def say(conversations: Conversations, fake: FakeOpenAI, msg: InboundMessage) -> None:
    """One plain earlier turn, then /new so that it is an earlier session."""
    fake.say("Noted.")
    sink = ListSink()
    await conversations.handle(msg, sink)
    await conversations.handle(
        InboundMessage(msg.platform, msg.chat_id, msg.chat_type, msg.user_id, "/new"), sink
    )
    assert sink.replies[0] == "Noted."


async def seed(conversations: Conversations, fake: FakeOpenAI) -> None:
    await say(conversations, fake, message("my cat Biscuit hates the vacuum cleaner"))
    await say(conversations, fake, message("SHADOW-43: my cat loves the vacuum", user="43"))


def recap_requests(fake: FakeOpenAI) -> list[RecordedRequest]:
    return [r for r in fake.requests if isinstance(r.body, dict) and not r.body.get("stream")]


def tool_result(fake: FakeOpenAI) -> dict[str, Any]:
    """The session_search result the model read in the last request."""
    [tool] = [m for m in fake.requests[-1].body["messages"] if m["role"] == "tool"]
    assert tool["name"] == "session_search"
    result: dict[str, Any] = json.loads(tool["content"])
    return result


async def ask(
    conversations: Conversations, fake: FakeOpenAI, msg: InboundMessage, *recap: Turn
) -> str:
    """A turn whose model calls session_search for "cat vacuum", then answers "Done."."""
    fake.call_tools(ToolCall("session_search", {"query": "cat vacuum"}, id="call_s"))
    for turn in recap:
        fake.add_turn(turn)
    fake.say("Done.")
    sink = ListSink()
    await conversations.handle(msg, sink)
    return sink.replies[0]


def everything_sent(fake: FakeOpenAI, since: int) -> str:
    return json.dumps([r.body for r in fake.requests[since:]], ensure_ascii=False)


async def test_session_search_finds_the_earlier_session_and_returns_a_recap(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    await seed(conversations, fake)
    [earlier] = await services.sessions.list_sessions(SearchScope("telegram-42"))
    before = len(fake.requests)
    reply = await ask(
        conversations, fake, message("what does my cat hate?"), Turn("Biscuit hates the vacuum.")
    )
    assert reply == "Done."
    offered = [t["function"]["name"] for t in fake.requests[before].body["tools"]]
    assert "session_search" in offered
    [recap] = recap_requests(fake)
    system, asked = (m["content"] for m in recap.body["messages"])
    assert "summarise" in system.lower()
    assert "Search query: cat vacuum" in asked
    assert "user: my cat Biscuit hates the vacuum cleaner" in asked
    assert "what does my cat hate?" not in asked  # the current session is left out
    assert "SHADOW-43" not in everything_sent(fake, before)
    result = tool_result(fake)
    [found] = result["sessions"]
    today = datetime.now(UTC).date().isoformat()
    assert found == {
        "session_id": earlier.id,
        "date": today,
        "source": "telegram",
        "chat_type": "private",
        "kind": "recap",
        "recap": "Biscuit hates the vacuum.",
    }
    current, _ = await services.sessions.list_sessions(SearchScope("telegram-42"))
    stored = await services.sessions.get_messages(
        current.id, SearchScope("telegram-42"), lineage=False
    )
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert json.loads(stored[2].content)["sessions"][0]["kind"] == "recap"


@pytest.mark.parametrize(
    ("recap", "why"),
    [
        # a 400 is not retried; the turn it leaves queued is then the streamed answer
        ([Turn("Done.", fault=Fault.http(400))], "the recap failed"),
        ([Turn("x" * 1_000_000)], "the recap was too long"),
        ([Turn("")], "the recap was empty"),
        ([Turn("never sent", fault=Fault.stall(after=0))], "the recap timed out"),
    ],
)
async def test_a_failing_recap_model_returns_snippets_and_the_next_turn_works(
    fake: FakeOpenAI, services: Services, recap: list[Turn], why: str
) -> None:
    conversations = serving(services)
    await seed(conversations, fake)
    fake.call_tools(ToolCall("session_search", {"query": "cat vacuum"}, id="call_s"))
    for turn in recap:
        fake.add_turn(turn)
    if recap[0].fault is None or recap[0].fault.kind != "http":
        fake.say("Done.")
    sink = ListSink()
    await conversations.handle(message("what does my cat hate?"), sink)
    assert sink.replies == ["Done."]
    [found] = tool_result(fake)["sessions"]
    assert (found["kind"], found["why"]) == ("snippets", why)
    assert [s["text"] for s in found["snippets"]] == ["my cat Biscuit hates the vacuum cleaner"]
    assert "x" * 100 not in json.dumps(found)
    fake.say("Still here.")
    await conversations.handle(message("thanks"), sink)
    assert sink.replies[-1] == "Still here."


async def test_in_a_group_only_that_groups_sessions_of_the_person_appear(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    await seed(conversations, fake)  # 42's direct chat, 43's direct chat
    group = "-1001"
    await say(
        conversations, fake, message("GROUP-42 cat vacuum robot", chat=group, chat_type="group")
    )
    await say(
        conversations,
        fake,
        message("GROUP-43 cat vacuum too", user="43", chat=group, chat_type="group"),
    )
    await say(conversations, fake, message("OTHER-GROUP cat vacuum", chat="-77", chat_type="group"))
    before = len(fake.requests)
    reply = await ask(
        conversations,
        fake,
        message("the cat?", chat=group, chat_type="group"),
        Turn("A robot vacuum."),
    )
    assert reply == "Done."
    [found] = tool_result(fake)["sessions"]
    assert (found["kind"], found["chat_type"]) == ("recap", "group")
    sent = everything_sent(fake, before)
    assert "GROUP-42 cat vacuum robot" in sent
    for foreign in ("Biscuit", "SHADOW-43", "GROUP-43", "OTHER-GROUP"):
        assert foreign not in sent


async def test_from_a_direct_chat_only_the_persons_own_sessions_appear(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    await seed(conversations, fake)
    await say(
        conversations, fake, message("GROUP-43 cat vacuum", user="43", chat="-5", chat_type="group")
    )
    await say(conversations, fake, message("GROUP-42 cat vacuum", chat="-5", chat_type="group"))
    before = len(fake.requests)
    await ask(conversations, fake, message("cat?"), Turn("recap one"), Turn("recap two"))
    found = tool_result(fake)["sessions"]
    assert sorted(s["chat_type"] for s in found) == ["group", "private"]
    assert {s["recap"] for s in found} == {"recap one", "recap two"}
    sent = everything_sent(fake, before)
    assert "SHADOW-43" not in sent and "GROUP-43" not in sent
    assert "GROUP-42" in sent and "Biscuit" in sent


async def test_bad_arguments_are_a_tool_error_and_the_turn_goes_on(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    await seed(conversations, fake)
    fake.call_tools(ToolCall("session_search", {"query": "cat", "since": "last tuesday"}))
    fake.say("Which day?")
    sink = ListSink()
    await conversations.handle(message("cat?"), sink)
    assert sink.replies == ["Which day?"]
    result = tool_result(fake)
    assert result["success"] is False and "since must be an ISO date" in result["error"]
    assert recap_requests(fake) == []

"""A private thread stays in its thread: `Conversations.handle`, the fake model, real state.db.

A Discord thread's messages carry the parent channel as `chat_id` and the
thread as `thread_id`; a Telegram forum topic's carry the group and the topic,
and the same rule holds for them. What a person says in a private thread must not come
back in the parent channel: not in a `/recall` recap, not in a
`session_search` result, not in the history provider's prefetched context.
Every check reads what reached the model (the fake's recorded requests) and
what the person was shown; a channel note matching the same words proves
each path did search and would have shown what it found.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Services, open_services
from gateway.conversation import Conversations
from gateway.messages import InboundMessage
from tests.fakes.openai import FakeOpenAI, ToolCall
from tests.gateway.serving import config_for, serving
from tests.gateway.sinks import ListSink
from tests.timing import scaled

PLACES = [("discord", "7000", "7001"), ("telegram", "-1007000", "5")]
"""(platform, parent channel or forum group, thread or topic)."""
SECRET = "THREAD-SECRET: the surprise party at the lighthouse is for Dana"
NOTE = "CHANNEL-NOTE: the party at the lighthouse needs a playlist"
SECRET_WORDS = ("THREAD-SECRET", "surprise", "Dana")


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(chunk_size=7) as server:
        yield server


@pytest.fixture
async def services(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    config = config_for(fake.url, tmp_path / "data", recap_timeout=scaled(2.0))
    async with open_services(config) as opened:
        yield opened


@dataclass(frozen=True)
class Place:
    platform: str
    chat: str
    thread: str

    def says(self, text: str, *, in_thread: bool = False, user: str = "11") -> InboundMessage:
        """`text` from `user`, in the thread or (by default) in the parent channel."""
        return InboundMessage(
            platform=self.platform,
            chat_id=self.chat,
            chat_type="group",
            user_id=user,
            text=text,
            thread_id=self.thread if in_thread else None,
        )


@pytest.fixture(params=PLACES, ids=[p[0] for p in PLACES])
def place(request: pytest.FixtureRequest) -> Place:
    return Place(*request.param)


async def handle(conversations: Conversations, msg: InboundMessage) -> str:
    sink = ListSink()
    await conversations.handle(msg, sink)
    return "\n".join(sink.replies)


async def earlier(conversations: Conversations, fake: FakeOpenAI, msg: InboundMessage) -> None:
    """One plain turn, then /new in the same place, so that it is an earlier session."""
    fake.say("Noted.")
    assert await handle(conversations, msg) == "Noted."
    new = InboundMessage(msg.platform, msg.chat_id, msg.chat_type, msg.user_id, "/new")
    await handle(conversations, replace(new, thread_id=msg.thread_id))


def sent_since(fake: FakeOpenAI, start: int) -> str:
    return json.dumps([r.body for r in fake.requests[start:]], ensure_ascii=False)


def tool_result(fake: FakeOpenAI) -> dict[str, Any]:
    [tool] = [m for m in fake.requests[-1].body["messages"] if m["role"] == "tool"]
    result: dict[str, Any] = json.loads(tool["content"])
    return result


@pytest.fixture
async def conversations(fake: FakeOpenAI, services: Services, place: Place) -> Conversations:
    """The person's private-thread session and their earlier session in the parent channel."""
    served = serving(services)
    await earlier(served, fake, place.says(SECRET, in_thread=True))
    await earlier(served, fake, place.says(NOTE))
    return served


async def test_recall_in_the_parent_channel_brings_back_nothing_of_the_thread(
    fake: FakeOpenAI, conversations: Conversations, place: Place
) -> None:
    start = len(fake.requests)
    fake.say("The channel wants a playlist for the party.")  # the one recap asked for
    reply = await handle(conversations, place.says("/recall lighthouse party"))
    assert "The channel wants a playlist for the party." in reply
    assert "in this group's past conversations" in reply
    sent = sent_since(fake, start)
    assert len(fake.requests) - start == 1 and "CHANNEL-NOTE" in sent
    for secret in SECRET_WORDS:
        assert secret not in sent and secret not in reply


async def test_session_search_and_prefetch_in_the_parent_channel_see_nothing_of_the_thread(
    fake: FakeOpenAI, conversations: Conversations, place: Place
) -> None:
    start = len(fake.requests)
    fake.call_tools(ToolCall("session_search", {"query": "lighthouse party"}, id="call_s"))
    fake.say("A playlist is needed.")  # the recap of the channel's session
    fake.say("Done.")
    reply = await handle(conversations, place.says("planning the party at the lighthouse"))
    assert reply == "Done."
    first = json.dumps(fake.requests[start].body, ensure_ascii=False)
    assert "Earlier conversations with this user" in first and "CHANNEL-NOTE" in first
    [found] = tool_result(fake)["sessions"]
    assert found["recap"] == "A playlist is needed."
    sent = sent_since(fake, start)
    for secret in SECRET_WORDS:
        assert secret not in sent


async def test_inside_the_thread_recall_and_prefetch_see_only_the_thread(
    fake: FakeOpenAI, conversations: Conversations, place: Place
) -> None:
    start = len(fake.requests)
    fake.say("Dana's party is a surprise.")
    reply = await handle(conversations, place.says("/recall lighthouse party", in_thread=True))
    assert "Dana's party is a surprise." in reply and "in this thread's" in reply
    sent = sent_since(fake, start)
    assert "THREAD-SECRET" in sent and "CHANNEL-NOTE" not in sent
    start = len(fake.requests)
    fake.say("Sure.")
    assert await handle(
        conversations, place.says("planning the party at the lighthouse", in_thread=True)
    )
    prefetched = json.dumps(fake.requests[start].body, ensure_ascii=False)
    assert "Earlier conversations with this user" in prefetched
    assert "THREAD-SECRET" in prefetched and "CHANNEL-NOTE" not in prefetched


async def test_another_member_of_the_thread_recalls_nothing_of_the_first(
    fake: FakeOpenAI, conversations: Conversations, place: Place
) -> None:
    start = len(fake.requests)
    reply = await handle(
        conversations, place.says("/recall lighthouse party", in_thread=True, user="12")
    )
    assert reply.startswith('Nothing found for "lighthouse party"')
    assert len(fake.requests) == start


async def test_the_persons_direct_chat_sees_their_channel_but_not_their_thread(
    fake: FakeOpenAI, conversations: Conversations, place: Place
) -> None:
    start = len(fake.requests)
    fake.say("A playlist for the lighthouse party.")
    direct = InboundMessage(place.platform, "11", "private", "11", "/recall lighthouse party")
    reply = await handle(conversations, direct)
    assert "A playlist for the lighthouse party." in reply
    sent = sent_since(fake, start)
    assert len(fake.requests) - start == 1 and "CHANNEL-NOTE" in sent
    for secret in SECRET_WORDS:
        assert secret not in sent and secret not in reply

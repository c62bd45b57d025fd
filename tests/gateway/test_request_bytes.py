"""The history a request carries is the one rebuilt from the store, turn after turn.

`Conversations` keeps a cached session's history between turns (`SentHistory`)
instead of reading and rebuilding it from state.db each time. The prompt cache
of the model's provider depends on the request bytes, so this drives one
session through `Conversations.handle`, against two fake model servers (main
and auxiliary), with tool calls, messages longer than the message cap, a
refused model call that leaves a message unanswered, a message delivered
twice, a restart (a cold cache) and a compression; after every turn it rebuilds
the history the straightforward way (the session's stored prompt, then
`as_sent` of every stored message before this turn's, cut to the message cap)
and checks that each of the turn's requests starts with exactly that, compared
as JSON text, so the order of keys counts too.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from gateway.agent.compression import Budget, clip_history
from gateway.agent.transcript import as_sent
from gateway.app import Services
from gateway.conversation import Conversations
from gateway.messages import InboundMessage
from memory_core import SearchScope
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink
from tests.gateway.test_compression_e2e import BUDGET, two_model_services
from tests.gateway.test_conversation import message

CAP = Budget(BUDGET).message_cap
USER = SearchScope(user_key="telegram-42")


def _message(text: str, message_id: str | None = None) -> InboundMessage:
    return replace(message(text), message_id=message_id)


def _padded(text: str, size: int) -> str:
    return (text + " " + "lorem ipsum " * size)[:size]


def _json(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)


@dataclass
class Bot:
    main: FakeOpenAI
    aux: FakeOpenAI
    services: Services
    conversations: Conversations
    checked: int = 0  # requests whose history was checked

    async def turn(self, text: str, message_id: str | None = None) -> None:
        """Handle one message, then check the requests it made against the store."""
        before = len(self.main.requests)
        await self.conversations.handle(_message(text, message_id), ListSink())
        requests = [r.body for r in self.main.requests[before:]]
        if requests:
            await self._check(text, requests)

    async def _check(self, text: str, requests: list[dict[str, Any]]) -> None:
        info = await self.services.sessions.current_session("telegram:private:42")
        assert info is not None
        stored = await self.services.sessions.get_messages(info.id, USER, lineage=False)
        mine = [i for i, m in enumerate(stored) if m.role == "user" and m.content == text]
        assert mine, f"the message {text[:30]!r} is not in the open session"
        prompt = await self.services.sessions.get_system_prompt(info.id, USER)
        expected = [{"role": "system", "content": prompt}]
        expected += clip_history([as_sent(m) for m in stored[: mine[-1]]], CAP)
        assert len(requests[0]["messages"]) == len(expected) + 1  # and this turn's message
        for body in requests:
            sent = body["messages"]
            assert _json(sent[: len(expected)]) == _json(expected)
            assert sent[len(expected)]["role"] == "user"
            self.checked += 1


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with (
        FakeOpenAI(chunk_size=500) as main,
        FakeOpenAI(echo_when_idle=True) as aux,
        two_model_services(tmp_path, main, aux) as services,
    ):
        bot = Bot(main, aux, services, serving(services))
        yield bot
        await bot.conversations.close()


async def test_every_request_carries_the_history_rebuilt_from_the_store(bot: Bot) -> None:
    for n in range(28):
        if n % 5 == 1:
            bot.main.call_tools(ToolCall("skills_list", {}, id=f"call_{n}"), text=f"looking {n}")
        if n % 7 == 3:
            bot.main.call_tools(ToolCall("skills_list", {}, id=f"call_{n}_b"))  # no text
        bot.main.say(_padded(f"reply {n}", 5000 if n == 4 else 300))
        size = 4500 if n == 2 else 200  # n == 2: longer than the cap, cut in requests
        await bot.turn(_padded(f"message {n}", size), message_id=f"m{n}")
        if n == 9:  # refused: the message stays unanswered, and is sent again
            bot.main.fail_next(Fault.http(400))
            await bot.turn("refused once", message_id="r1")
            bot.main.say("answered at last")
            await bot.turn("refused once", message_id="r1")
        if n == 12:  # delivered again after its answer: answered once
            await bot.turn(_padded("message 12", 200), message_id="m12")
        if n == 14:  # a restart: nothing cached
            await bot.conversations.close()
            bot.conversations = serving(bot.services)
    sessions = await bot.services.sessions.list_sessions(USER, limit=10)
    lineage = await bot.services.sessions.get_messages(sessions[0].id, USER)
    assert len({m.session_id for m in lineage}) >= 2, "the session never compressed"
    assert bot.aux.requests, "no summary was asked for"
    assert bot.checked == len(bot.main.requests) > 35

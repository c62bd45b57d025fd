"""The global limit on model calls in flight, seen at the fake model server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from gateway.agent.limits import ModelCallLimiter
from gateway.agent.model_client import ModelClient
from gateway.agent.turn import CUT_NOTE
from gateway.app import open_services
from gateway.config import load_config
from gateway.messages import InboundMessage
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink
from tests.timing import scaled

SKILLS = Path(__file__).resolve().parents[3] / "skills"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class InFlight:
    """Counts the chat requests the fake is answering, and the most at once."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0

    def middleware(self) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
        @web.middleware
        async def count(request: web.Request, handler: Handler) -> web.StreamResponse:
            self.now += 1
            self.most = max(self.most, self.now)
            try:
                return await handler(request)
            finally:
                self.now -= 1

        return count


@pytest.fixture
async def counted() -> AsyncIterator[tuple[FakeOpenAI, InFlight]]:
    server = FakeOpenAI(chunk_size=4, echo_when_idle=True)
    in_flight = InFlight()
    server.app.middlewares.append(in_flight.middleware())
    async with server:
        yield server, in_flight


def message(user: str, text: str) -> InboundMessage:
    return InboundMessage(
        platform="telegram", chat_id=user, chat_type="private", user_id=user, text=text
    )


def said(fake: FakeOpenAI, index: int) -> str:
    return str(fake.requests[index].body["messages"][-1]["content"])


async def test_many_chats_never_have_more_calls_in_flight_than_max_concurrency(
    counted: tuple[FakeOpenAI, InFlight], tmp_path: Path
) -> None:
    fake, in_flight = counted
    (tmp_path / "mnemo.yaml").write_text("llm:\n  max_concurrency: 2\n", encoding="utf-8")
    env = {
        "OPENAI_BASE_URL": fake.url + "/v1",
        "MNEMO_HOME": str(tmp_path / "data"),
        "MNEMO_SKILLS_DIR": str(SKILLS),
    }
    async with open_services(load_config(tmp_path / "mnemo.yaml", environ=env)) as services:
        limiter = services.model.limiter
        assert limiter is not None and services.auxiliary.limiter is limiter  # one, shared
        for _ in range(8):
            fake.fail_next(Fault.stall())  # each request is held until released
        conversations = serving(services)
        sinks = [ListSink() for _ in range(8)]
        chats = [
            asyncio.create_task(conversations.handle(message(str(100 + i), f"hi {i}"), sinks[i]))
            for i in range(8)
        ]
        for round_ in range(1, 5):  # two at a time reach the model, the others wait for a slot
            await wait_until(lambda n=2 * round_: len(fake.requests) == n and fake.stalled == 2)
            assert in_flight.now == 2 and limiter.in_flight == 2
            fake.release()
        await asyncio.wait_for(asyncio.gather(*chats), scaled(10))
    assert in_flight.most == 2
    assert sorted(s.replies[0] for s in sinks) == sorted(f"echo: hi {i}" for i in range(8))


async def test_waiting_foreground_calls_go_before_waiting_background_ones(
    counted: tuple[FakeOpenAI, InFlight],
) -> None:
    fake, _ = counted
    limiter = ModelCallLimiter(1)
    reply = ModelClient(fake.url + "/v1", None, "m", 10.0, limiter=limiter)
    aux = ModelClient(fake.url + "/v1", None, "m", 10.0, limiter=limiter, background=True)
    try:
        fake.fail_next(Fault.stall())
        first = asyncio.create_task(reply.complete([{"role": "user", "content": "first"}]))
        await wait_until(lambda: fake.stalled == 1)
        recap = asyncio.create_task(aux.complete([{"role": "user", "content": "recap"}]))
        await wait_until(lambda: limiter.waiting == (0, 1))
        answer = asyncio.create_task(reply.complete([{"role": "user", "content": "answer"}]))
        await wait_until(lambda: limiter.waiting == (1, 1))
        fake.release()
        await asyncio.wait_for(asyncio.gather(first, recap, answer), scaled(10))
    finally:
        await reply.close()
        await aux.close()
    assert [said(fake, i) for i in range(3)] == ["first", "answer", "recap"]
    assert limiter.in_flight == 0 and limiter.waiting == (0, 0)


async def test_background_work_leaves_a_slot_free_for_replies(
    counted: tuple[FakeOpenAI, InFlight],
) -> None:
    fake, in_flight = counted
    limiter = ModelCallLimiter(2)  # one slot is reserved for replies
    reply = ModelClient(fake.url + "/v1", None, "m", 10.0, limiter=limiter)
    aux = ModelClient(fake.url + "/v1", None, "m", 10.0, limiter=limiter, background=True)
    try:
        fake.fail_next(Fault.stall())
        held = asyncio.create_task(aux.complete([{"role": "user", "content": "recap 1"}]))
        await wait_until(lambda: fake.stalled == 1)
        queued = asyncio.create_task(aux.complete([{"role": "user", "content": "recap 2"}]))
        await wait_until(lambda: limiter.waiting == (0, 1))
        answer = await asyncio.wait_for(
            reply.complete([{"role": "user", "content": "hi"}]), scaled(5)
        )
        assert answer == "echo: hi"  # answered while background work holds and awaits slots
        assert not queued.done() and in_flight.now == 1
        fake.release()
        await asyncio.wait_for(asyncio.gather(held, queued), scaled(10))
    finally:
        await reply.close()
        await aux.close()
    assert in_flight.most == 2


async def test_a_slot_is_not_held_while_waiting_to_retry(
    counted: tuple[FakeOpenAI, InFlight],
) -> None:
    fake, _ = counted
    limiter = ModelCallLimiter(1)
    client = ModelClient(fake.url + "/v1", None, "m", 30.0, stall_timeout=2.0, limiter=limiter)
    try:
        fake.fail_next(Fault.http(429, retry_after=1.5))
        throttled = asyncio.create_task(client.complete([{"role": "user", "content": "a"}]))
        await wait_until(lambda: len(fake.requests) == 1 and limiter.in_flight == 0)
        other = await asyncio.wait_for(
            client.complete([{"role": "user", "content": "b"}]), scaled(1)
        )
        assert other == "echo: b" and not throttled.done()  # served during the retry wait
        assert await asyncio.wait_for(throttled, scaled(10)) == "echo: a"
    finally:
        await client.close()
    assert [said(fake, i) for i in range(3)] == ["a", "b", "a"]


async def test_a_429_with_one_slot_answers_each_chat_exactly_once(
    counted: tuple[FakeOpenAI, InFlight], tmp_path: Path
) -> None:
    fake, in_flight = counted
    (tmp_path / "mnemo.yaml").write_text("llm:\n  max_concurrency: 1\n", encoding="utf-8")
    env = {"OPENAI_BASE_URL": fake.url + "/v1", "MNEMO_HOME": str(tmp_path / "data")}
    env["MNEMO_SKILLS_DIR"] = str(SKILLS)
    async with open_services(load_config(tmp_path / "mnemo.yaml", environ=env)) as services:
        conversations = serving(services)
        fake.fail_next(Fault.http(429, retry_after=0.2))
        first, second = ListSink(), ListSink()
        await asyncio.gather(
            conversations.handle(message("1", "one"), first),
            conversations.handle(message("2", "two"), second),
        )
    assert first.replies == ["echo: one"] and second.replies == ["echo: two"]
    assert len(fake.requests) == 3 and in_flight.most == 1


async def test_a_stalled_reply_frees_its_slot_for_the_next_chat(
    counted: tuple[FakeOpenAI, InFlight], tmp_path: Path
) -> None:
    fake, in_flight = counted
    (tmp_path / "mnemo.yaml").write_text(
        "llm:\n  max_concurrency: 1\n  timeout: 5.0\n  stall_timeout: 0.5\n", encoding="utf-8"
    )
    env = {"OPENAI_BASE_URL": fake.url + "/v1", "MNEMO_HOME": str(tmp_path / "data")}
    env["MNEMO_SKILLS_DIR"] = str(SKILLS)
    async with open_services(load_config(tmp_path / "mnemo.yaml", environ=env)) as services:
        conversations = serving(services)
        fake.say("Half of an answer that then goes silent", fault=Fault.stall(after=3))
        fake.say("Second chat answered.")
        stalled, waiting = ListSink(), ListSink()
        first = asyncio.create_task(conversations.handle(message("1", "tell me"), stalled))
        await wait_until(lambda: fake.stalled == 1)
        await asyncio.wait_for(conversations.handle(message("2", "and me?"), waiting), scaled(5))
        await asyncio.wait_for(first, scaled(5))
        fake.release()
    assert stalled.replies == ["Half of \n" + CUT_NOTE]
    assert waiting.replies == ["Second chat answered."]
    assert in_flight.most <= 2  # the abandoned request may linger at the fake


def test_the_limiter_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        ModelCallLimiter(0)
    with pytest.raises(ValueError):
        ModelCallLimiter(2, reserved=2)
    assert ModelCallLimiter(1).reserved == 0 and ModelCallLimiter(4).reserved == 1


async def test_a_cancelled_waiter_gives_up_its_place() -> None:
    limiter = ModelCallLimiter(1)
    async with limiter.slot():
        gone = asyncio.create_task(limiter.slot(background=True).__aenter__())
        await wait_until(lambda: limiter.waiting == (0, 1))
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert limiter.waiting == (0, 0)
    assert limiter.in_flight == 0
    async with limiter.slot(background=True):
        assert limiter.in_flight == 1

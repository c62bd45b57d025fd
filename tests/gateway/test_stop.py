"""`/stop` and commands that do not wait: a reply being written does not hold the chat.

Alice's reply is held at the model after its first words; she asks for /status,
stops the reply, and talks on; Bob, beside her, is not affected. What is checked
is what each of them was shown and what the session holds.
"""

from __future__ import annotations

import asyncio

from gateway.app import Services
from gateway.messages import InboundMessage
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault
from tests.gateway.serving import private, serving, stored_rows
from tests.gateway.sinks import ListSink
from tests.timing import scaled


def message(text: str, user: str = "1", message_id: str | None = None) -> InboundMessage:
    return private(text, user, message_id)


class Watched(ListSink):
    """A sink that also tells when anything was written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.written = asyncio.Event()

    async def write(self, piece: str) -> None:
        await super().write(piece)
        self.written.set()


async def test_stop_cuts_the_reply_keeps_what_was_shown_and_the_chat_goes_on(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    fake.say("Once upon a time there was a very long story that never ended")
    fake.fail_next(Fault.stall(after=2))  # two chunks shown, then the model goes quiet
    reply = Watched()
    turn = asyncio.create_task(
        conversations.handle(message("tell me a story", message_id="1"), reply)
    )
    await asyncio.wait_for(reply.written.wait(), scaled(5))
    await wait_until(lambda: fake.stalled == 1)

    status = ListSink()  # a command is answered while the reply is being written
    await asyncio.wait_for(conversations.handle(message("/status"), status), scaled(5))
    assert len(status.replies) == 1 and "session" in status.replies[0].lower()

    stop = ListSink()
    await asyncio.wait_for(conversations.handle(message("/stop"), stop), scaled(5))
    assert stop.replies == ["Stopped."]
    await asyncio.wait_for(turn, scaled(5))
    shown = reply.replies[0]
    assert shown.startswith("Once") and shown.endswith("\n\n(stopped)")
    assert "never ended" not in shown
    assert stored_rows(services, "1") == [("user", "tell me a story"), ("assistant", shown)]

    fake.release()
    await wait_until(lambda: fake.stalled == 0)
    fake.say("The end.")
    after = ListSink()
    await conversations.handle(message("and then?", message_id="2"), after)
    assert after.replies == ["The end."]
    history = fake.requests[-1].body["messages"]
    assert {"role": "assistant", "content": shown} in history  # the model knows it was cut


async def test_stop_touches_only_the_chat_it_was_sent_in(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    fake.say("Bob's long answer, written slowly")
    fake.fail_next(Fault.stall(after=2))
    bobs = Watched()
    bob = asyncio.create_task(conversations.handle(message("hi", "2", "7"), bobs))
    await asyncio.wait_for(bobs.written.wait(), scaled(5))

    alice = ListSink()  # Alice has nothing running: her /stop stops nothing of Bob's
    await conversations.handle(message("/stop", "1"), alice)
    assert alice.replies == ["Nothing is being written right now."]
    assert not bob.done() and fake.stalled == 1
    fake.release()
    await asyncio.wait_for(bob, scaled(5))
    assert bobs.replies == ["Bob's long answer, written slowly"]


class Ordered(ListSink):
    """A sink that notes, in a list shared with others, when its reply finished."""

    def __init__(self, name: str, order: list[str]) -> None:
        super().__init__()
        self.name, self.order = name, order

    async def finish(self) -> None:
        await super().finish()
        self.order.append(self.name)


async def test_new_waits_for_the_reply_being_written(fake: FakeOpenAI, services: Services) -> None:
    conversations = serving(services)
    fake.fail_next(Fault.stall())
    fake.say("First answer.")
    order: list[str] = []
    first, new, status = Ordered("reply", order), Ordered("new", order), Ordered("status", order)
    turn = asyncio.create_task(conversations.handle(message("one", message_id="1"), first))
    await wait_until(lambda: fake.stalled == 1)
    fresh = asyncio.create_task(conversations.handle(message("/new"), new))
    await asyncio.wait_for(conversations.handle(message("/status"), status), scaled(5))
    assert order == ["status"]  # /status answered at once; /new waits for the reply
    fake.release()
    await asyncio.wait_for(asyncio.gather(turn, fresh), scaled(5))
    assert order == ["status", "reply", "new"]
    assert first.replies == ["First answer."] and new.replies == ["Started a fresh session."]

"""Refused strangers cost the bot almost nothing: their codes are written off the event
loop, together, once per new stranger at most, and at most once an hour per person
across restarts; an allowed person is answered meanwhile."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gateway.access import REFUSALS_AT_ONCE, AccessPolicy
from gateway.app import Services
from gateway.conversation import Conversations
from gateway.pairing import ACCESS_FILE, ALPHABET, CODE_LENGTH, CODE_TTL, AccessList
from memory_core import DocumentHandle, FileDocument
from memory_core.documents import Signature
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import private, serving
from tests.gateway.sinks import ListSink
from tests.timing import scaled

MEMBER = "7"
STRANGERS = 300
_CODE = re.compile(rf"pairing code is ([{ALPHABET}]{{{CODE_LENGTH}}})\b")


class HeldDocument:
    """A `FileDocument` whose changes wait until `gate` opens (a slow disk, a locked
    row), counting the writes made."""

    def __init__(self, path: Path) -> None:
        self.file = FileDocument(path)
        self.gate = threading.Event()
        self.writes = 0

    @property
    def label(self) -> str:
        return self.file.label

    def signature(self) -> Signature | None:
        return self.file.signature()

    def read(self) -> str | None:
        return self.file.read()

    @contextmanager
    def changing(self) -> Iterator[DocumentHandle]:
        if not self.gate.wait(timeout=scaled(20)):  # a blocked event loop fails the test, not hangs
            self.gate.set()
        with self.file.changing() as handle:
            yield _Counted(handle, self)


class _Counted:
    def __init__(self, handle: DocumentHandle, document: HeldDocument) -> None:
        self._handle, self._document = handle, document

    def read(self) -> str | None:
        return self._handle.read()

    def write(self, text: str) -> None:
        self._document.writes += 1
        self._handle.write(text)


def bot(
    services: Services, document: HeldDocument | FileDocument, now: list[float]
) -> Conversations:
    access = AccessList(document, clock=lambda: now[0])
    return serving(services, AccessPolicy({"telegram": [MEMBER]}, granted=access))


async def say(conversations: Conversations, user: str, text: str) -> str:
    sink = ListSink()
    await conversations.handle(private(text, user), sink)
    return "".join(sink.replies)


async def test_an_allowed_person_is_answered_while_strangers_codes_are_written(
    fake: FakeOpenAI, services: Services
) -> None:
    document = HeldDocument(services.config.home / ACCESS_FILE)
    conversations = bot(services, document, [time.time()])
    strangers = [
        asyncio.create_task(say(conversations, str(1000 + n), "let me in"))
        for n in range(STRANGERS)
    ]
    fake.say("Hello, member.")
    answered = await asyncio.wait_for(say(conversations, MEMBER, "hi"), timeout=scaled(10))
    held_meanwhile = not document.gate.is_set()
    document.gate.set()
    replies = await asyncio.wait_for(asyncio.gather(*strangers), timeout=scaled(30))
    assert answered == "Hello, member."
    assert held_meanwhile  # answered while every stranger's code was still being written
    codes = {m.group(1) for m in map(_CODE.search, replies) if m is not None}
    assert len(codes) == STRANGERS  # each stranger got their own code
    assert 1 <= document.writes <= STRANGERS
    writes = document.writes
    again = await asyncio.gather(*(say(conversations, str(1000 + n), "hi") for n in range(50)))
    assert again == [""] * 50 and document.writes == writes  # told once: nothing written


async def test_a_code_is_issued_at_most_once_an_hour_across_restarts(
    fake: FakeOpenAI, services: Services
) -> None:
    path = services.config.home / ACCESS_FILE
    now = [time.time()]
    started = bot(services, FileDocument(path), now)
    first = await say(started, "501", "hi")
    code = _CODE.search(first)
    assert code is not None, first
    assert _CODE.search(await say(started, "503", "hi")) is not None
    written = path.read_text()

    now[0] += CODE_TTL / 2  # the bot restarted half an hour later
    restarted = bot(services, FileDocument(path), now)
    second = await say(restarted, "501", "hi again")
    assert "501" in second and _CODE.search(second) is None  # told, without a new code
    assert path.read_text() == written  # nothing written
    assert (
        AccessList(FileDocument(path), clock=lambda: now[0]).redeem(code.group(1)).user_id == "501"
    )

    now[0] += CODE_TTL  # restarted again, an hour and a half after the first codes
    third = await say(bot(services, FileDocument(path), now), "503", "hi")
    assert _CODE.search(third) is not None  # the hour is over: a new code
    assert path.read_text() != written


class SlowSink(ListSink):
    """A reply sink whose sends wait for `gate` (a slow platform), counting those at once."""

    def __init__(self, gate: asyncio.Event, sending: list[int]) -> None:
        super().__init__()
        self._gate, self._sending = gate, sending

    async def finish(self) -> None:
        if not self.unfinished:  # an empty reply sends nothing: not a send
            await super().finish()
            return
        self._sending[0] += 1
        self._sending[1] = max(self._sending[1], self._sending[0])
        await self._gate.wait()
        self._sending[0] -= 1
        await super().finish()


async def test_few_refusals_are_sent_at_once(fake: FakeOpenAI, services: Services) -> None:
    path = services.config.home / ACCESS_FILE
    conversations = bot(services, FileDocument(path), [time.time()])
    gate, sending = asyncio.Event(), [0, 0]  # now, most at once
    sinks = [SlowSink(gate, sending) for _ in range(STRANGERS)]
    strangers = [
        asyncio.create_task(conversations.handle(private("hi", str(1000 + n)), sinks[n]))
        for n in range(STRANGERS)
    ]
    deadline = time.monotonic() + scaled(10)
    while (path.read_text().count('"sha256"') if path.exists() else 0) < STRANGERS:
        assert time.monotonic() < deadline, "the strangers' codes were not all written"
        await asyncio.sleep(0.01)
    for _ in range(100):  # every stranger's task runs on to its send, or to the queue
        await asyncio.sleep(0)
    assert 1 <= sending[1] <= REFUSALS_AT_ONCE  # the platform client is not crowded
    gate.set()
    await asyncio.wait_for(asyncio.gather(*strangers), timeout=scaled(30))
    assert all(_CODE.search("".join(s.replies)) for s in sinks)
    assert all(len([r for r in s.replies if r]) == 1 for s in sinks)  # one refusal each


async def test_a_refused_update_is_confirmed_before_its_refusal_is_sent(
    fake: FakeOpenAI, services: Services
) -> None:
    path = services.config.home / ACCESS_FILE
    conversations = bot(services, FileDocument(path), [time.time()])
    gate, sending, confirmed = asyncio.Event(), [0, 0], asyncio.Event()
    sink = SlowSink(gate, sending)  # a slow platform: polling must not wait for it
    handled = asyncio.create_task(conversations.handle(private("hi", "600"), sink, confirmed.set))
    await asyncio.wait_for(confirmed.wait(), timeout=scaled(10))
    assert sending[0] == 1 and not handled.done()  # confirmed while the refusal is held
    gate.set()
    await asyncio.wait_for(handled, timeout=scaled(10))
    assert _CODE.search("".join(sink.replies))

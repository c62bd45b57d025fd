"""An in-memory chat for the delivery tests: it records every call, keeps the
messages it sent, refuses like Telegram does (an unknown message, unchanged
text) and fails on cue; time is a fake clock that a fake sleep advances
(`FakeClock`) or that only the test advances (`SteppedClock`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gateway.delivery import ChannelLimits
from gateway.errors import AnswerUnreadableError, DeliveryError
from gateway.messages import Choice


class FakeClock:
    """Monotonic time that only moves when a test or a `sleep` moves it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class SteppedClock:
    """Monotonic time that only the test moves; a `sleep` waits until the time
    has moved past its end, so a writer and the pump share one timeline."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self.now

    @property
    def sleeping(self) -> int:
        """How many sleeps wait for the time to move."""
        return len(self._sleepers)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        entry = (self.now + seconds, asyncio.get_running_loop().create_future())
        self._sleepers.append(entry)
        try:
            await entry[1]
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for entry in [e for e in self._sleepers if e[0] <= self.now]:
            self._sleepers.remove(entry)
            if not entry[1].done():
                entry[1].set_result(None)


@dataclass
class Call:
    kind: str  # send | edit | draft | typing
    at: float
    text: str = ""
    message_id: str | None = None
    reply_to: str | None = None
    choices: tuple[Choice, ...] = ()
    draft_id: int | None = None
    previews: bool = False  # whether the call let the message show link previews


@dataclass
class FakeChannel:
    clock: FakeClock | SteppedClock
    limits: ChannelLimits = field(default_factory=lambda: ChannelLimits(max_units=4096))
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, str] = field(default_factory=dict)
    failures: dict[str, list[Exception]] = field(default_factory=dict)
    """Per kind, the errors the next calls raise, in order (the call is recorded)."""
    unread: dict[str, int] = field(default_factory=dict)
    """Per kind, how many next calls are carried out but answered unreadably (they raise
    `AnswerUnreadableError` after doing what they were asked)."""

    async def send(
        self,
        text: str,
        *,
        reply_to: str | None = None,
        choices: Sequence[Choice] = (),
        previews: bool = False,
    ) -> str:
        call = Call(
            "send", self.clock(), text, reply_to=reply_to, choices=tuple(choices), previews=previews
        )
        self._record(call)
        call.message_id = message_id = str(len(self.messages) + 1)
        self.messages[message_id] = text
        self._answer("send")
        return message_id

    async def edit(self, message_id: str, text: str, *, previews: bool = False) -> None:
        self._record(Call("edit", self.clock(), text, message_id=message_id, previews=previews))
        if message_id not in self.messages:
            raise DeliveryError("Message to edit not found")
        if self.messages[message_id] == text:
            raise DeliveryError("Message is not modified")
        self.messages[message_id] = text
        self._answer("edit")

    async def draft(self, draft_id: int, text: str) -> None:
        self._record(Call("draft", self.clock(), text, draft_id=draft_id))

    async def typing(self) -> None:
        self._record(Call("typing", self.clock()))

    async def send_document(self, path: Path) -> str:
        self._record(Call("document", self.clock(), path.name))
        message_id = str(len(self.messages) + 1)
        self.messages[message_id] = f"[file {path.name}]"
        return message_id

    def of(self, kind: str) -> list[Call]:
        return [call for call in self.calls if call.kind == kind]

    def _answer(self, kind: str) -> None:
        """Done; the answer unreadable when `unread` says so for `kind`."""
        if self.unread.get(kind, 0) > 0:
            self.unread[kind] -= 1
            raise AnswerUnreadableError("the answer is not JSON")

    def _record(self, call: Call) -> None:
        self.calls.append(call)
        queued = self.failures.get(call.kind)
        if queued:
            raise queued.pop(0)

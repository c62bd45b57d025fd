"""An in-memory chat for the delivery tests: it records every call, keeps the
messages it sent, refuses like Telegram does (an unknown message, unchanged
text) and fails on cue; time is a fake clock that a fake sleep advances."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gateway.delivery import ChannelLimits
from gateway.errors import DeliveryError
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


@dataclass
class Call:
    kind: str  # send | edit | draft | typing
    at: float
    text: str = ""
    message_id: str | None = None
    reply_to: str | None = None
    choices: tuple[Choice, ...] = ()
    draft_id: int | None = None


@dataclass
class FakeChannel:
    clock: FakeClock
    limits: ChannelLimits = field(default_factory=lambda: ChannelLimits(max_units=4096))
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, str] = field(default_factory=dict)
    failures: dict[str, list[Exception]] = field(default_factory=dict)
    """Per kind, the errors the next calls raise, in order (the call is recorded)."""

    async def send(
        self, text: str, *, reply_to: str | None = None, choices: Sequence[Choice] = ()
    ) -> str:
        self._record(Call("send", self.clock(), text, reply_to=reply_to, choices=tuple(choices)))
        message_id = str(len(self.messages) + 1)
        self.messages[message_id] = text
        return message_id

    async def edit(self, message_id: str, text: str) -> None:
        self._record(Call("edit", self.clock(), text, message_id=message_id))
        if message_id not in self.messages:
            raise DeliveryError("Message to edit not found")
        if self.messages[message_id] == text:
            raise DeliveryError("Message is not modified")
        self.messages[message_id] = text

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

    def _record(self, call: Call) -> None:
        self.calls.append(call)
        queued = self.failures.get(call.kind)
        if queued:
            raise queued.pop(0)

"""A recording inbox for the adapter tests: what reaches it (messages, presses, edits,
migrations), and a scripted answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from gateway.messages import (
    Choice,
    ChoiceSink,
    DocumentSink,
    InboundMessage,
    MessageEdit,
    ReplySink,
)


class Inbox:
    """Records what reaches it and answers with `reply` (``echo: <text>`` by default),
    offering `offer` as buttons and attaching `attach` (a file, like /export) where the
    sink sends them; can stall before storing."""

    def __init__(
        self, reply: Callable[[InboundMessage], str] | None = None, attach: Path | None = None
    ) -> None:
        self.messages: list[InboundMessage] = []
        self.chosen: list[tuple[InboundMessage, str]] = []
        self.migrations: list[tuple[str, str, str]] = []
        self.edits: list[MessageEdit] = []
        self.offer: tuple[Choice, ...] = ()
        self.attach = attach
        self.stall: asyncio.Event | None = None
        self.fail_after_stall = False
        self._reply = reply or (lambda m: f"echo: {m.text}")

    async def handle(
        self, message: InboundMessage, sink: ReplySink, on_stored: Callable[[], None] | None = None
    ) -> None:
        self.messages.append(message)
        if self.stall is not None:
            await self.stall.wait()
            if self.fail_after_stall:
                raise RuntimeError("crashed before storing")
        if on_stored is not None:
            on_stored()
        await sink.write(self._reply(message))
        if self.offer and isinstance(sink, ChoiceSink):
            await sink.offer(self.offer)
        if self.attach is not None:
            assert isinstance(sink, DocumentSink)
            await sink.attach(self.attach)
        await sink.finish()

    async def choose(self, message: InboundMessage, payload: str, sink: ReplySink) -> None:
        self.chosen.append((message, payload))
        await sink.write(f"chose {payload}")
        await sink.finish()

    async def edited(self, edit: MessageEdit) -> None:
        self.edits.append(edit)

    async def chat_migrated(self, platform: str, old_chat_id: str, new_chat_id: str) -> None:
        self.migrations.append((platform, old_chat_id, new_chat_id))

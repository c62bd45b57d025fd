"""The console adapter: one person talking to the bot in a terminal.

Each line read is one message; replies stream to the output as they arrive.
It reads and writes through the streams it is given, so tests drive it with
pipes and `mnemo run` with the terminal.
"""

from __future__ import annotations

import asyncio
import getpass
from typing import TextIO

from gateway.messages import InboundMessage, MessageHandler

QUIT_WORDS = frozenset({"/quit", "/exit"})


class ConsoleSink:
    """Writes a streamed reply to the output, ending it with a blank line."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    async def write(self, piece: str) -> None:
        self._out.write(piece)
        self._out.flush()

    async def finish(self) -> None:
        self._out.write("\n\n")
        self._out.flush()


class ConsoleAdapter:
    """Reads lines until end of input or ``/quit`` and hands each to the handler."""

    platform = "console"

    def __init__(self, stdin: TextIO, stdout: TextIO, user_id: str | None = None) -> None:
        self._in = stdin
        self._out = stdout
        self._user_id = user_id or getpass.getuser() or "operator"

    async def notify(self, message: InboundMessage, text: str) -> None:
        """A line outside any reply (a background review's summary), set apart by blank lines."""
        self._out.write(f"{text}\n\n")
        self._out.flush()

    async def run(self, handle: MessageHandler) -> None:
        sink = ConsoleSink(self._out)
        self._out.write("Mnemo console. Type a message; /help for commands, /quit to leave.\n")
        self._out.flush()
        while True:
            if self._in.isatty():
                self._out.write("> ")
                self._out.flush()
            line = await asyncio.to_thread(self._in.readline)
            if not line:
                return
            text = line.strip()
            if not text:
                continue
            if text in QUIT_WORDS:
                return
            message = InboundMessage(
                platform=self.platform,
                chat_id=self._user_id,
                chat_type="private",
                user_id=self._user_id,
                text=text,
                message_id=None,
                user_name=self._user_id,
            )
            await handle(message, sink)

"""The console adapter: one person talking to the bot in a terminal.

Each line read is one message; replies stream to the output as they arrive,
one message at a time. It reads and writes through the streams it is given, so
tests drive it with pipes and `mnemo run` with the terminal. End of input or
``/quit`` sets `done`, which stops the application.

On a terminal, a `ConsoleTerminal` reads the lines instead (line editing,
history): Ctrl-C while a reply is written sends ``/stop`` for it, Ctrl-C at an
empty prompt or Ctrl-D ends the chat, and a notice is printed above the prompt.
Otherwise (a pipe, a file, a test's streams) lines are read by a daemon
thread, one when the adapter asks for it: a read blocked on an open pipe cannot
be interrupted, and must not keep the process alive once the application has
stopped.

The console's own lines (its banner) are in the language it is given, the
config's ``locale.language``; the bot's answers follow the person's locale as
on any platform.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from gateway.errors import MediaDownloadError
from gateway.i18n import N_, Catalogs, Translator
from gateway.messages import CommandSpec, InboundMessage, Inbox, MediaRef, ReplySink

if TYPE_CHECKING:
    from gateway.adapters.console_terminal import ConsoleTerminal

log = logging.getLogger(__name__)

QUIT_WORDS = frozenset({"/quit", "/exit"})
STOP_TEXT = "/stop"  # what Ctrl-C during a reply sends
BANNER = N_("Mnemo console. Type a message; /help for commands, /quit to leave.")
STOP_HINT = N_("While I write a reply, Ctrl-C stops it.")
NO_FILE = N_("I could not get that file.")


class ConsoleSink:
    """Writes a streamed reply to the output, ending it with a blank line; `lead` goes
    before its first piece (a line break for an answer printed inside another's)."""

    def __init__(self, out: TextIO, lead: str = "") -> None:
        self._out = out
        self._lead = lead

    async def write(self, piece: str) -> None:
        self._out.write(self._lead + piece)
        self._lead = ""
        self._out.flush()

    async def finish(self) -> None:
        self._out.write("\n\n")
        self._out.flush()


class ConsoleAdapter:
    """Reads lines until end of input or ``/quit`` and hands each to the inbox."""

    platform = "console"

    def __init__(
        self,
        stdin: TextIO,
        stdout: TextIO,
        user_id: str | None = None,
        terminal: ConsoleTerminal | None = None,
        history: Callable[[str], Path] | None = None,
        lines: Translator | None = None,
    ) -> None:
        """`terminal`: reads the lines instead of `stdin` and prints where `stdout` does;
        without one, a terminal `stdin` gets one, keeping what this person types in the
        file `history(user_id)` names (none is kept without it); `lines`: the language of
        the console's own lines (English when None)."""
        self._translator = lines or Catalogs().translator("en")
        self._in = stdin
        self._out = stdout
        self._user_id = user_id or getpass.getuser() or "operator"
        if terminal is None and _is_terminal(stdin):
            terminal = _terminal(history, self._user_id)
        self._terminal = terminal
        self.done = asyncio.Event()
        self.ready = asyncio.Event()  # a terminal is connected once it is read
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._want = threading.Event()  # the reader thread reads one line when set
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._closed = False  # the reader thread ends instead of reading on

    @property
    def user_key(self) -> str:
        """The person at this terminal, as their data is kept."""
        return self._message("").user_key

    def speak(self, lines: Translator) -> None:
        """The console's own lines in `lines`' language (the person's own choice, known
        once the stores are open; the application calls it before `start`)."""
        self._translator = lines

    async def start(self, inbox: Inbox, commands: Sequence[CommandSpec]) -> None:
        """Print the banner and start reading; `/help` lists the commands, so the menu
        (`commands`) is not shown here."""
        self._out.write(self._translator._(BANNER) + "\n")
        if self._terminal is not None:  # where Ctrl-C is a /stop, not the end of the process
            self._out.write(self._translator._(STOP_HINT) + "\n")
        self._out.flush()
        if self._terminal is None:
            loop = asyncio.get_running_loop()
            reader = threading.Thread(target=self._read, args=(loop,), name="console", daemon=True)
            reader.start()
        self.ready.set()
        self._task = asyncio.create_task(self._serve(inbox), name="console")

    async def stop(self) -> None:
        """Take no more lines; the one being answered goes on."""
        self._stopped = True
        self._lines.put_nowait(None)

    async def close(self) -> None:
        """Stop answering (a reply still streaming is cut off) and wait for the task."""
        await self.stop()
        self._closed = True
        self._want.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def fetch_media(self, media: MediaRef, max_bytes: int) -> bytes:
        """The console makes no message with media: there is nothing to fetch."""
        raise MediaDownloadError(NO_FILE, f"the console has no file {media.ref!r}")

    async def notify(self, message: InboundMessage, text: str) -> None:
        """A line outside any reply (a background review's summary), set apart by blank lines
        (above the prompt, when one is shown)."""

        def write() -> None:
            self._out.write(f"{text}\n\n")
            self._out.flush()

        if self._terminal is None:
            write()
        else:
            await self._terminal.print_above(write)

    def reply_sink(self, message: InboundMessage) -> ReplySink:
        return ConsoleSink(self._out)

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        """The reader thread: a line each time one is wanted, then None at the end of input."""
        try:
            while True:
                self._want.wait()
                self._want.clear()
                if self._closed:
                    return
                line = self._in.readline()
                if not line:
                    break
                loop.call_soon_threadsafe(self._lines.put_nowait, line)
        except (OSError, ValueError) as exc:  # a closed or broken input ends the chat
            log.warning("console input failed: %s", exc)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(self._lines.put_nowait, None)

    async def _serve(self, inbox: Inbox) -> None:
        ahead: asyncio.Future[str | None] | None = None  # a line read while answering
        try:
            while not self._stopped:
                line = await (ahead or self._next_line())
                ahead = None
                if line is None or self._stopped:
                    return
                text = line.strip()
                if text in QUIT_WORDS:
                    return
                if text:
                    ahead = await self._answer(inbox, text)
        finally:
            if ahead is not None:
                ahead.cancel()
            self.done.set()

    async def _next_line(self) -> str | None:
        """The next line, or None at the end of the input."""
        if self._terminal is not None:
            return await self._terminal.read_line()
        if self._in.isatty():
            self._out.write("> ")
            self._out.flush()
        self._want.set()
        return await self._lines.get()

    async def _answer(self, inbox: Inbox, text: str) -> asyncio.Future[str | None] | None:
        """Hand one line to the inbox. While the reply is written, ``/stop`` typed (or,
        on a terminal, Ctrl-C) is sent at once, which the application answers even while
        the reply streams; another line read meanwhile waits for the reply to end and is
        returned (a pipe's next line), the keys typed ahead on a terminal for its prompt."""
        stopping: list[asyncio.Task[None]] = []

        def interrupt() -> None:
            if not stopping:
                # its line starts on a line of its own, not glued to the reply's text
                stop = inbox.handle(self._message(STOP_TEXT), ConsoleSink(self._out, "\n"))
                stopping.append(asyncio.create_task(stop, name="console-stop"))

        reply = asyncio.ensure_future(inbox.handle(self._message(text), ConsoleSink(self._out)))
        if self._terminal is not None:
            with self._terminal.watching(interrupt, STOP_TEXT):
                await reply
        else:
            ahead = await self._read_while(reply, interrupt)
        for task in stopping:  # its line ("Stopped.") before the next prompt
            await task
        return None if self._terminal is not None else ahead

    async def _read_while(
        self, reply: asyncio.Future[None], interrupt: Callable[[], None]
    ) -> asyncio.Future[str | None]:
        """Read lines until `reply` is done: ``/stop`` interrupts it; any other line (or
        the end of input) is kept, unread further, for after the reply."""
        ahead: asyncio.Future[str | None] = asyncio.ensure_future(self._next_line())
        while not reply.done():
            either: set[asyncio.Future[Any]] = {reply, ahead}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if reply.done() or not ahead.done():
                break
            line = ahead.result()
            if line is None or line.strip() != STOP_TEXT:
                break  # kept for after the reply
            interrupt()
            ahead = asyncio.ensure_future(self._next_line())
        await reply
        return ahead

    def _message(self, text: str) -> InboundMessage:
        return InboundMessage(
            platform=self.platform,
            chat_id=self._user_id,
            chat_type="private",
            user_id=self._user_id,
            text=text,
            message_id=None,
            user_name=self._user_id,
        )


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except ValueError:  # a closed stream
        return False


def _terminal(history: Callable[[str], Path] | None, user_id: str) -> ConsoleTerminal:
    """A terminal for the process's own terminal, with `user_id`'s history if kept."""
    # imported here: prompt_toolkit is loaded only for a console on a terminal
    from gateway.adapters.console_terminal import ConsoleTerminal, private_history

    return ConsoleTerminal(None if history is None else private_history(history(user_id)))

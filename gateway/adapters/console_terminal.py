"""The console's terminal: a prompt that edits like a shell, through prompt_toolkit.

`ConsoleTerminal` reads one line at a time with line editing and a history
kept in a file (created 0600: it holds what the person typed), watches the
keys while a reply is written so that Ctrl-C can stop it, and prints a
background notice above a prompt being shown instead of over it. Ctrl-D, or
Ctrl-C at an empty prompt, ends the input; Ctrl-C with text clears the line.

It is used only when the console's input is a terminal; tests drive it with
prompt_toolkit's pipe input and an output of their own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.output import Output

PROMPT = "> "


def private_history(path: Path) -> History:
    """A history kept in `path`, which only its owner can read or write (0600, in a
    folder of its own made 0700 if it is new)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)  # an older file made with another mask
    return FileHistory(str(path))


class ConsoleTerminal:
    """Line editing, history, Ctrl-C during a reply, and notices above the prompt."""

    def __init__(
        self,
        history: History | None = None,
        input: Input | None = None,
        output: Output | None = None,
    ) -> None:
        """`input`/`output`: prompt_toolkit's own (the process's terminal when None)."""
        self._session: PromptSession[str] = PromptSession(
            PROMPT,
            history=history or InMemoryHistory(),
            key_bindings=_bindings(),
            input=input,
            output=output,
        )
        self._typed_ahead: list[KeyPress] = []  # keys typed during a reply, for the prompt

    async def read_line(self) -> str | None:
        """The next line typed, or None when the person ended the input (Ctrl-D, or
        Ctrl-C at an empty prompt)."""
        try:
            return await self._session.prompt_async(pre_run=self._replay)
        except (EOFError, KeyboardInterrupt):
            return None

    @contextlib.contextmanager
    def watching(self, on_interrupt: Callable[[], None], stop_word: str) -> Iterator[None]:
        """For the block (a reply being written), call `on_interrupt` at each Ctrl-C and
        at a line `stop_word` typed and entered (it goes nowhere else); the other keys
        typed meanwhile go to the next prompt, as a shell's typing ahead."""
        keys = self._session.input
        line_start = len(self._typed_ahead)  # where the line being typed ahead begins

        def ready() -> None:
            nonlocal line_start
            for press in keys.read_keys():
                if press.key == Keys.ControlC:
                    on_interrupt()
                elif press.key in (Keys.ControlM, Keys.ControlJ):
                    typed = "".join(p.data for p in self._typed_ahead[line_start:])
                    if typed.strip() == stop_word:
                        del self._typed_ahead[line_start:]
                        on_interrupt()
                    else:
                        self._typed_ahead.append(press)
                        line_start = len(self._typed_ahead)
                else:
                    self._typed_ahead.append(press)

        with keys.raw_mode(), keys.attach(ready):
            yield

    def _replay(self) -> None:
        """Hand the keys typed ahead to the prompt that starts."""
        presses, self._typed_ahead = self._typed_ahead, []
        if presses:
            processor = self._session.app.key_processor
            processor.feed_multiple(presses)
            processor.process_keys()

    async def print_above(self, write: Callable[[], None]) -> None:
        """Run `write` (it prints a notice) above the prompt when one is shown: the prompt
        is erased first and drawn again after, with what was typed so far."""
        app = self._session.app
        if app.is_running and app.context is not None:
            # the prompt runs in its own context: run_in_terminal finds its application there
            await app.context.run(run_in_terminal, write)
        else:
            write()


def _bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        """Ctrl-C clears a line being typed, like a shell; at an empty prompt it quits."""
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=EOFError())

    return bindings

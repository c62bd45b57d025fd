"""The console on a terminal: the real console adapter and prompt_toolkit, driven by keys.

The keys go in through prompt_toolkit's pipe input; what the terminal shows is
read from a VT100 output over a string, through a small screen emulator; the
replies are written to the same string. The bot is the real service against the
fake model.
"""

from __future__ import annotations

import asyncio
import io
import stat
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output.vt100 import Vt100_Output

from gateway.adapters.console_adapter import ConsoleAdapter
from gateway.adapters.console_terminal import ConsoleTerminal, private_history
from gateway.app import console_history_file
from gateway.messages import InboundMessage
from gateway.service import Service
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault
from tests.fakes.screen import Screen
from tests.gateway.serving import config_for
from tests.timing import scaled

UP, ENTER, CTRL_C, CTRL_D = "\x1b[A", "\r", "\x03", "\x04"


@dataclass
class Console:
    keys: PipeInput
    screen: io.StringIO
    adapter: ConsoleAdapter
    run: asyncio.Task[None]

    def shown(self) -> str:
        """What the terminal shows now."""
        return Screen().feed(self.screen.getvalue()).text()

    def at_prompt(self, typed: str = "") -> bool:
        """The prompt is shown, with `typed` typed so far, the cursor after it."""
        return Screen().feed(self.screen.getvalue()).cursor_line() == f"> {typed}"

    def type(self, text: str) -> None:
        self.keys.send_text(text)


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe:
        yield pipe


def terminal_over(screen: io.StringIO, keys: PipeInput, history: Path) -> ConsoleTerminal:
    output = Vt100_Output(screen, lambda: Size(rows=24, columns=100), term="xterm")
    return ConsoleTerminal(private_history(history), input=keys, output=output)


@pytest.fixture
async def console(fake: FakeOpenAI, tmp_path: Path, keys: PipeInput) -> AsyncIterator[Console]:
    screen = io.StringIO()
    terminal = terminal_over(screen, keys, console_history_file(tmp_path / "data", "ada"))
    adapter = ConsoleAdapter(io.StringIO(), screen, user_id="ada", terminal=terminal)
    service = Service(config_for(fake.url, tmp_path / "data"), [adapter], signals=())
    run = asyncio.create_task(service.run())
    opened = Console(keys, screen, adapter, run)
    await wait_until(lambda: opened.at_prompt())
    yield opened
    if not run.done():
        opened.type(CTRL_C + CTRL_D)  # clear what is typed, then end the input
    await asyncio.wait_for(run, scaled(10))


async def test_up_recalls_the_last_line_and_the_history_file_is_private(
    fake: FakeOpenAI, console: Console, tmp_path: Path
) -> None:
    fake.say("First answer.")
    fake.say("Second answer.")
    console.type("typo to clear" + CTRL_C)  # Ctrl-C with text clears the line, like a shell
    console.type("what is the capital of Peru?" + ENTER)
    await wait_until(lambda: "First answer." in console.shown())
    await wait_until(lambda: console.at_prompt())
    console.type(UP + ENTER)
    await wait_until(lambda: "Second answer." in console.shown())
    asked = [r.body["messages"][-1]["content"] for r in fake.requests]
    assert asked == ["what is the capital of Peru?", "what is the capital of Peru?"]
    assert "^[[A" not in console.shown()
    console.type(CTRL_D)
    await asyncio.wait_for(console.run, scaled(10))
    path = console_history_file(tmp_path / "data", "ada")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "typo to clear" not in path.read_text(encoding="utf-8")


async def test_the_history_is_there_at_the_next_start(tmp_path: Path, keys: PipeInput) -> None:
    path = console_history_file(tmp_path, "ada")
    first = terminal_over(io.StringIO(), keys, path)
    keys.send_text("remember the milk" + ENTER)
    assert await asyncio.wait_for(first.read_line(), scaled(5)) == "remember the milk"
    again = terminal_over(io.StringIO(), keys, path)
    keys.send_text(UP + ENTER)
    assert await asyncio.wait_for(again.read_line(), scaled(5)) == "remember the milk"
    keys.send_text(CTRL_C)  # at an empty prompt: the end of the input
    assert await asyncio.wait_for(again.read_line(), scaled(5)) is None


def test_each_person_has_a_history_file_of_their_own(tmp_path: Path) -> None:
    ada, bob = console_history_file(tmp_path, "ada"), console_history_file(tmp_path, "bob")
    assert ada != bob and ada.parent == bob.parent == tmp_path / "console"
    assert ada.name == "console-ada.history"  # by user key: erasing the person removes it
    assert console_history_file(tmp_path, "../../etc/passwd").parent == tmp_path / "console"


async def test_ctrl_c_during_a_reply_stops_it_at_once_and_the_chat_goes_on(
    fake: FakeOpenAI, console: Console
) -> None:
    fake.say("Once upon a time there was a very long story that never ended")
    fake.fail_next(Fault.stall(after=2))  # the first words, then the model goes quiet
    fake.say("Here is a short one.")
    console.type("tell me a story" + ENTER)
    await wait_until(lambda: fake.stalled == 1 and "Once" in console.shown())
    console.type(CTRL_C)
    await wait_until(lambda: "Stopped." in console.shown(), timeout=2)
    await wait_until(lambda: console.at_prompt())
    assert "(stopped)" in console.shown() and "never ended" not in console.shown()
    [stopped] = [line for line in console.shown().splitlines() if "Stopped." in line]
    assert stopped.startswith("Stopped.")  # on a line of its own, not glued to the reply
    assert "While I write a reply, Ctrl-C stops it." in console.shown()  # said at the start
    assert not console.adapter.done.is_set()  # Ctrl-C stopped the reply, not the chat
    console.type("a short one then" + ENTER)
    await wait_until(lambda: "Here is a short one." in console.shown())


async def test_stop_typed_during_a_reply_stops_it_and_other_typing_waits_for_the_prompt(
    fake: FakeOpenAI, console: Console
) -> None:
    fake.say("Once upon a time there was a very long story that never ended")
    fake.fail_next(Fault.stall(after=2))
    console.type("tell me a story" + ENTER)
    await wait_until(lambda: fake.stalled == 1 and "Once" in console.shown())
    console.type("/stop" + ENTER + "and then")  # a stop, then the start of the next line
    await wait_until(lambda: "Stopped." in console.shown(), timeout=2)
    await wait_until(lambda: console.at_prompt("and then"))
    assert "never ended" not in console.shown()
    assert "Nothing is being written" not in console.shown()
    assert not console.adapter.done.is_set()


async def test_ctrl_c_at_an_empty_prompt_ends_the_chat(console: Console) -> None:
    console.type(CTRL_C)
    await asyncio.wait_for(console.run, scaled(10))
    assert console.adapter.done.is_set()


async def test_a_notice_prints_above_the_prompt_and_the_typed_text_stays(
    console: Console,
) -> None:
    console.type("half a thou")
    await wait_until(lambda: console.at_prompt("half a thou"))
    message = InboundMessage("console", "ada", "private", "ada", "(a background review)")
    await asyncio.wait_for(console.adapter.notify(message, "💾 Memory updated"), scaled(5))
    await wait_until(lambda: console.at_prompt("half a thou"))
    lines = console.shown().splitlines()
    assert lines[-3:] == ["💾 Memory updated", "", "> half a thou"]  # above, not over it
    assert lines.count("> half a thou") == 1  # the old prompt was erased, not left above

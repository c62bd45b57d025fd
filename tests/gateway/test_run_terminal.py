"""`mnemo run` with no platform token: the console on a terminal, one line without one.

The real `mnemo` script runs with its stdin and stdout on a pseudo-terminal
(`pty.openpty()`), the way a person starts it in a shell; the model is the fake OpenAI
server in a process of its own. Without a terminal (stdin from /dev/null, as under a
supervisor) there is nothing to serve: one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.processes import ROOT, run_environment
from tests.timing import scaled

MNEMO = Path(sys.executable).parent / "mnemo"
PROMPT = "\x1b[0m>"
"""How prompt_toolkit draws the console's prompt (``> ``): the ``>``, then the cursor moved."""
CPR_REQUEST = b"\x1b[6n"
"""prompt_toolkit asks the terminal where the cursor is; a terminal answers (`Terminal`)."""


@pytest.fixture
def model_url() -> Iterator[str]:
    """The standalone fake model (echoes what it is sent when it has no script)."""
    fake = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai", "--port", "0"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert fake.stdout is not None
        yield fake.stdout.readline().split()[-1]
    finally:
        fake.terminate()
        fake.wait(timeout=scaled(10))


class Terminal:
    """The master side of a pseudo-terminal: what the program wrote, and typing."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.seen = b""

    def read_until(self, wanted: str, timeout: float = 30.0, start: int = 0) -> str:
        """Everything shown so far once `wanted` appears past byte `start`."""
        deadline = time.monotonic() + scaled(timeout)
        target = wanted.encode()
        while target not in self.seen[start:]:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{wanted!r} not shown; the terminal shows {self.text!r}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # EIO: the slave side is closed (the process ended)
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"{wanted!r} not shown before the end: {self.text!r}")
                self._take(chunk)
        return self.text

    def _take(self, chunk: bytes) -> None:
        """What the program wrote; a cursor position request is answered as a terminal
        does (row 1, column 1), else prompt_toolkit waits for it and warns."""
        asked = self.seen.count(CPR_REQUEST)
        self.seen += chunk  # counted in all that was seen: a request split across reads
        for _ in range(self.seen.count(CPR_REQUEST) - asked):
            os.write(self.fd, b"\x1b[1;1R")

    def drain(self) -> None:
        """Read what is left (so the program never blocks writing to a full terminal)."""
        while select.select([self.fd], [], [], 0)[0]:
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                return
            if not chunk:
                return
            self._take(chunk)

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    @property
    def text(self) -> str:
        return self.seen.decode(errors="replace")


@pytest.mark.slow  # a real mnemo process on a terminal, start to exit
def test_on_a_terminal_without_a_token_the_console_answers_and_ctrl_d_ends_it(
    model_url: str, tmp_path: Path
) -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = run_environment(model_url, tmp_path)
    env.update(TERM="xterm", USER="ada", LOGNAME="ada")
    env.pop("NO_COLOR", None)
    try:
        process = subprocess.Popen(
            [str(MNEMO), "run"], stdin=slave, stdout=slave, stderr=subprocess.PIPE,
            env=env, cwd=tmp_path, start_new_session=True,
        )  # fmt: skip
    finally:
        os.close(slave)  # the child holds its own copies
    terminal = Terminal(master)
    try:
        terminal.read_until(PROMPT)
        mark = len(terminal.seen)
        terminal.type("good morning\r")
        terminal.read_until("echo: good morning", start=mark)
        mark = len(terminal.seen)
        terminal.read_until(PROMPT, start=mark)  # the next prompt, after the reply
        terminal.type("\x04")  # Ctrl-D at an empty prompt
        deadline = time.monotonic() + scaled(30)
        while process.poll() is None and time.monotonic() < deadline:
            terminal.drain()
            time.sleep(0.02)  # polls for the exit; the deadline bounds it
        assert process.poll() is not None, f"still running after Ctrl-D: {terminal.text!r}"
        assert process.stderr is not None
        err = process.stderr.read().decode()
        assert process.returncode == 0, err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=scaled(10))
        if process.stderr is not None:
            process.stderr.close()
        os.close(master)
    assert (tmp_path / "data" / "state.db").exists()
    assert "Traceback" not in err
    assert "doesn't support cursor position requests" not in terminal.text


@pytest.mark.slow  # a real mnemo process (about 3 s to import on a loaded machine)
def test_without_a_terminal_or_a_token_it_exits_with_one_line(tmp_path: Path) -> None:
    env = run_environment("http://127.0.0.1:9", tmp_path)  # no model: nothing is started
    proc = subprocess.run(
        [str(MNEMO), "run"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=scaled(60), cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("mnemo: no platform to serve: set TELEGRAM_BOT_TOKEN or DISCORD")
    assert "--console" in line
    assert not (tmp_path / "data" / "state.db").exists()  # nothing was started

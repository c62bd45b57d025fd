"""The background review and the session-end extraction, seen from a real `mnemo chat`.

A person types into the `mnemo` script's console (a subprocess, stdin and stdout
pipes) while the model is the standalone fake OpenAI server, also a process of its
own, serving a JSON script of turns in request order: the replies first, then the
background agent's tool-call turn and its closing text.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

from memory_core import SearchScope, SessionDB, SessionInfo, SessionStore
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
USER = "ada"
USER_KEY = f"console-{USER}"
TIMEOUT = 30.0  # seconds for anything the bot does; the fake answers at once
NOTICE = "💾 Memory updated"


def memory_call(content: str) -> dict[str, Any]:
    arguments = {"target": "user", "action": "add", "content": content}
    return {"tool_calls": [{"name": "memory", "arguments": arguments}]}


@pytest.fixture
def model(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """The standalone fake model serving the test's script; yields its base URL."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(request.param, ensure_ascii=False), encoding="utf-8")
    command = [sys.executable, "-m", "tests.fakes.openai", "--port", "0", "--script", str(script)]
    fake = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout is not None
        yield fake.stdout.readline().split()[-1] + "/v1"
    finally:
        fake.terminate()
        fake.wait(timeout=scaled(10))


class Chat:
    """A running `mnemo chat`: type lines, read its output line by line (with timeouts)."""

    def __init__(self, tmp_path: Path, model_url: str, config: str, **more_env: str) -> None:
        (tmp_path / "mnemo.yaml").write_text(config, encoding="utf-8")  # found in the cwd
        self.home = tmp_path / "data"
        self.errors = tmp_path / "stderr.txt"
        env = {**os.environ, "OPENAI_BASE_URL": model_url, "MNEMO_HOME": str(self.home)}
        env.update(USER=USER, LOGNAME=USER, **more_env)
        env.pop("MNEMO_CONFIG", None)
        with self.errors.open("w", encoding="utf-8") as errors:
            self.proc = subprocess.Popen(
                [str(Path(sys.executable).parent / "mnemo"), "chat"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                text=True, encoding="utf-8", cwd=tmp_path, env=env,
            )  # fmt: skip
        self.lines: list[str] = []  # every line read so far
        self._lines: queue.Queue[str | None] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stdout: TextIO) -> None:
        for line in stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)  # end of output

    def type(self, *lines: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(f"{line}\n" for line in lines))
        self.proc.stdin.flush()

    def read_until(self, text: str) -> int:
        """Read until a line containing `text`; returns its index in `lines`."""
        deadline = time.monotonic() + scaled(TIMEOUT)
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                raise AssertionError(f"no {text!r} within {TIMEOUT} s: {self.output()}") from None
            if line is None:
                raise AssertionError(f"output ended before {text!r}: {self.output()}")
            self.lines.append(line)
            if text in line:
                return len(self.lines) - 1

    def quit(self) -> None:
        """Type /quit and wait for a clean exit."""
        self.type("/quit")
        assert self.proc.wait(timeout=scaled(TIMEOUT)) == 0, self.output()

    def output(self) -> str:
        return f"stdout {self.lines!r}, stderr {self.errors.read_text(encoding='utf-8')!r}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=scaled(10))
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()

    def profile(self) -> str:
        path = self.home / "memories" / "users" / USER_KEY / "USER.md"
        return path.read_text(encoding="utf-8") if path.exists() else ""


@pytest.fixture
def chat_factory(tmp_path: Path, model: str) -> Iterator[Any]:
    chats: list[Chat] = []

    def start(config: str) -> Chat:
        chats.append(Chat(tmp_path, model, config))
        return chats[-1]

    yield start
    for chat in chats:
        chat.close()


SESSION_KEY = f"console:private:{USER}"


def chat_transcript(home: Path) -> list[tuple[str, str]]:
    """The messages of the console chat's current session."""
    with SessionDB(home / "state.db").open() as db:
        session = db.current_session(SESSION_KEY)
        assert session is not None
        messages = db.get_messages(session.id, SearchScope(user_key=USER_KEY), lineage=False)
        return [(m.role, m.content) for m in messages]


def sessions_quoting(home: Path, text: str) -> list[SessionInfo]:
    """The person's sessions with a message containing `text`."""
    scope = SearchScope(user_key=USER_KEY)
    with SessionDB(home / "state.db").open() as db:
        return [
            s
            for s in db.list_sessions(scope)
            if any(text in m.content for m in db.get_messages(s.id, scope, lineage=False))
        ]


REPLY = "Nice to meet you, Ada! Bees in Lyon, how lovely."
FACT = "Keeps bees on a rooftop in Lyon"


@pytest.mark.parametrize(
    "model", [[{"text": REPLY}, memory_call(FACT), {"text": "Saved."}]], indirect=True
)
def test_a_review_after_the_reply_saves_a_fact_and_says_so(chat_factory: Any) -> None:
    chat = chat_factory("memory: {nudge_interval: 1}\n")
    said = "Hi, I'm Ada; I keep bees on a rooftop in Lyon."
    chat.type(said)
    notice = chat.read_until(NOTICE)
    chat.quit()

    assert chat.lines[notice] == NOTICE  # notifications "on": the line alone, no entries
    replies = [i for i, line in enumerate(chat.lines) if REPLY in line]
    assert replies and replies[0] < notice  # the reply first, then the review's line
    assert FACT in chat.profile()
    assert chat_transcript(chat.home) == [("user", said), ("assistant", REPLY)]
    # the review's prompt is only in its own audit record (an ended internal session)
    for record in sessions_quoting(chat.home, "[Background review."):
        assert record.source == "review" and record.ended_at is not None
    with SessionDB(chat.home / "state.db").open() as db:
        session = db.current_session(SESSION_KEY)
        assert session is not None
        counters = db.get_counters(session.id)
    assert counters is not None and counters.turns_since_memory == 0  # the review finished


ASSISTANT_ONLY = "Since you are allergic to bee stings, plant ferns rather than lavender."


def reviews_done(home: Path, count: int) -> None:
    """Wait until `count` reviews have ended (their audit records are closed)."""
    deadline = time.monotonic() + scaled(TIMEOUT)
    while time.monotonic() < deadline:
        ended = [s for s in sessions_quoting(home, "[Background review.") if s.ended_at]
        if len(ended) >= count:
            return
        time.sleep(0.02)  # polling another process's database: no event to wait on
    raise AssertionError(f"fewer than {count} reviews ended within {TIMEOUT} s")


@pytest.mark.slow  # two turns and two reviews of a real `mnemo chat`: 3 to 7 s here
@pytest.mark.parametrize(
    "model",
    [
        [
            {"text": ASSISTANT_ONLY},
            memory_call("Allergic to bee stings"),  # only the assistant said it
            {"text": "Nothing the person said."},
            {"text": "Chickens, lovely."},
            memory_call("Keeps chickens in the garden"),
            {"text": "Saved."},
        ]
    ],
    indirect=True,
)
def test_a_review_saves_nothing_that_only_the_assistant_said(chat_factory: Any) -> None:
    chat = chat_factory("memory: {nudge_interval: 1}\n")
    chat.type("What should I plant on my balcony?")
    chat.read_until(ASSISTANT_ONLY)
    reviews_done(chat.home, 1)
    assert chat.profile() == ""
    chat.type("I keep chickens in the garden too.")
    notice = chat.read_until(NOTICE)
    chat.quit()

    assert [line for line in chat.lines if line == NOTICE] == [chat.lines[notice]]  # one
    assert "Keeps chickens in the garden" in chat.profile()
    assert "bee" not in chat.profile()


async def pending_extractions(home: Path) -> list[int]:
    store = SessionStore(home / "state.db")
    await store.open()
    try:
        return [entry.session_id for entry in await store.pending_extractions()]
    finally:
        await store.close()


LEARNED = "Moved to Lyon in 2024; keep answers short"


@pytest.mark.slow
@pytest.mark.parametrize(
    "model",
    [
        [
            {"text": "Hello Ada!"},
            {"text": "Lyon is lovely. Short answers, noted."},
            memory_call(LEARNED),
            {"text": "Saved.", "delay": 1.0},  # still running when /quit arrives
        ]
    ],
    indirect=True,
)
def test_new_runs_the_extraction_and_quit_lets_it_finish(chat_factory: Any) -> None:
    chat = chat_factory("memory: {nudge_interval: 0}\nskills: {creation_nudge_interval: 0}\n")
    chat.type("Hi, I'm Ada.")
    chat.read_until("Hello Ada!")
    chat.type("I moved to Lyon in 2024. Keep answers short, please.")
    chat.read_until("Short answers, noted.")
    chat.type("/new")
    chat.read_until("Started a fresh session.")
    chat.quit()  # the extraction's last model call is still out: the shutdown grace covers it

    assert LEARNED in chat.profile()
    # finished within the grace, not cut and left due for the next start (a delay past
    # SHUTDOWN_GRACE_SECONDS leaves this session here, with the fact saved)
    assert asyncio.run(pending_extractions(chat.home)) == []
    assert NOTICE not in "\n".join(chat.lines)  # an extraction tells the chat nothing

"""`mnemo run` as a service: one instance per data directory, a clean stop on SIGTERM
(in-flight turns get `shutdown_grace`, a second signal skips it), adapters that end or
fail, and `mnemo chat` as before. Real `mnemo` subprocesses against the fake model."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from filelock import FileLock

from gateway.adapters.console_adapter import ConsoleAdapter
from gateway.config import Config, load_config
from gateway.errors import AdapterFailedError, ConfigError, InstanceLockedError
from gateway.messages import CommandSpec, InboundMessage, Inbox, ReplySink
from gateway.service import AcceptFailures, Service, instance_lock, run_console
from memory_core import SearchScope, SessionDB
from tests.fakes.base import serving_in_thread
from tests.fakes.openai import FakeOpenAI, Fault
from tests.timing import scaled, wait_until_sync

ROOT = Path(__file__).resolve().parents[2]
SKILLS = ROOT / "skills"
USER = "ada"
USER_KEY = f"console-{USER}"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with serving_in_thread(FakeOpenAI(chunk_size=8)) as server:
        yield server


def config_for(fake: FakeOpenAI, home: Path) -> Config:
    env = {"OPENAI_BASE_URL": fake.url + "/v1", "MNEMO_HOME": str(home)}
    return load_config(None, environ={**env, "MNEMO_SKILLS_DIR": str(SKILLS)})


def start_mnemo(command: str, fake: FakeOpenAI, home: Path, grace: float) -> subprocess.Popen[str]:
    """`mnemo <command>` with its stdin a pipe kept open (a person who has not left)."""
    (home.parent / "mnemo.yaml").write_text(f"shutdown_grace: {grace}\n", encoding="utf-8")
    env = {
        **os.environ,
        "OPENAI_BASE_URL": fake.url + "/v1",
        "MNEMO_HOME": str(home),
        "MNEMO_SKILLS_DIR": str(SKILLS),
        "USER": USER,
        "LOGNAME": USER,
    }
    for name in ("TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "MNEMO_CONFIG"):
        env.pop(name, None)
    mnemo = Path(sys.executable).parent / "mnemo"
    return subprocess.Popen(
        [str(mnemo), *command.split()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, cwd=home.parent,
    )  # fmt: skip


def say(process: subprocess.Popen[str], line: str) -> None:
    assert process.stdin is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()


def wait_for(predicate: Callable[[], object], timeout: float = 20.0) -> None:
    """Poll `predicate()` until true; the subprocess works on its own clock."""
    wait_until_sync(predicate, timeout)


def sessions_of(home: Path) -> list[tuple[bool, list[tuple[str, str]]]]:
    """Each session of the console person: (still open, [(role, content)…])."""
    with SessionDB(home / "state.db") as db:
        scope = SearchScope(user_key=USER_KEY)
        return [
            (s.ended_at is None, [(m.role, m.content) for m in db.get_messages(s.id, scope)])
            for s in db.list_sessions(scope)
        ]


def finish(process: subprocess.Popen[str], timeout: float = 20.0) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=scaled(timeout))
    return process.returncode, out, err


# ----- one instance per data directory ---------------------------------------------------


def test_a_second_instance_on_the_same_home_fails_with_one_line(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    home = tmp_path / "data"
    home.mkdir()
    with FileLock(str(home / "mnemo.lock")):  # as a running `mnemo run` holds it
        process = start_mnemo("run --console", fake, home, grace=1)
        code, _, err = finish(process)
    assert code == 1
    assert err.splitlines() == [
        f"mnemo: another mnemo is already running with data in {home.resolve()}; stop it "
        "first (or use a different MNEMO_HOME)"
    ]
    assert fake.requests == [] and not (home / "state.db").exists()


def test_a_home_that_cannot_be_made_is_a_config_error_not_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    home = blocker / "data"  # a permission check cannot see this one coming; mkdir can
    refused = pytest.raises(ConfigError, match="home: cannot make or lock the data directory")
    with refused, instance_lock(home):
        pass


def test_the_lock_is_held_for_the_whole_run_and_released_after(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    home, other = tmp_path / "data", tmp_path / "other"
    config = config_for(fake, home)
    fake.say("Hi.")

    async def scenario() -> None:
        adapter = ConsoleAdapter(io.StringIO("hello\n"), io.StringIO(), user_id=USER)
        gate = _Gate(adapter)
        running = asyncio.create_task(Service(config, [gate], signals=()).run())
        await asyncio.wait_for(gate.started.wait(), scaled(10))
        with pytest.raises(InstanceLockedError, match="already running with data in"):
            await Service(config, [_Idle()], signals=()).run()
        empty = ConsoleAdapter(io.StringIO(""), io.StringIO(), user_id=USER)
        second = Service(config_for(fake, other), [empty], signals=())
        await asyncio.wait_for(second.run(), scaled(10))  # a different home is served
        gate.release.set()
        await asyncio.wait_for(running, scaled(10))

    asyncio.run(scenario())
    assert (other / "state.db").exists()
    assert sessions_of(home) == [(True, [("user", "hello"), ("assistant", "Hi.")])]
    with instance_lock(home):  # free again once the run is over
        pass


# ----- stopping on a signal --------------------------------------------------------------


def test_sigterm_mid_turn_exits_0_with_the_message_stored_and_the_session_open(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    home = tmp_path / "data"
    fake.fail_next(Fault.stall())  # the model never answers
    process = start_mnemo("run --console", fake, home, grace=0.3)
    say(process, "remember the blue door")
    wait_for(lambda: fake.stalled == 1)  # the message is stored before the model is asked
    process.send_signal(signal.SIGTERM)
    code, out, err = finish(process)
    assert code == 0, err
    assert sessions_of(home) == [(True, [("user", "remember the blue door")])]
    assert "stopping (SIGTERM)" in err and err.rstrip().endswith("stopped")
    assert "blue door" not in err  # no message text in the logs
    assert "serving console with data in" in err and "serving" not in out


def test_a_turn_in_flight_finishes_within_the_grace(fake: FakeOpenAI, tmp_path: Path) -> None:
    home = tmp_path / "data"
    fake.say("Blue it is.", delay=0.5)
    process = start_mnemo("run --console", fake, home, grace=15)
    say(process, "pick a colour")
    wait_for(lambda: len(fake.requests) == 1)
    process.send_signal(signal.SIGTERM)
    code, out, _ = finish(process)
    assert code == 0 and "Blue it is." in out
    assert sessions_of(home) == [(True, [("user", "pick a colour"), ("assistant", "Blue it is.")])]


def test_a_second_signal_skips_the_rest_of_the_grace(fake: FakeOpenAI, tmp_path: Path) -> None:
    home = tmp_path / "data"
    fake.fail_next(Fault.stall())
    process = start_mnemo("run --console", fake, home, grace=60)
    say(process, "hello")
    wait_for(lambda: fake.stalled == 1)
    process.send_signal(signal.SIGTERM)
    assert process.stderr is not None
    wait_for(lambda: process.poll() is not None or _stderr_has(process, "stopping (SIGTERM)"))
    began = time.monotonic()
    process.send_signal(signal.SIGINT)
    code, _, err = finish(process, timeout=15)
    assert code == 0, err
    assert time.monotonic() - began < scaled(10)  # not the 60 s grace
    assert sessions_of(home) == [(True, [("user", "hello")])]


def _stderr_has(process: subprocess.Popen[str], text: str) -> bool:
    """Read stderr lines as they come (kept on the process for `finish`)."""
    assert process.stderr is not None
    line = process.stderr.readline()
    return text in line


# ----- the console: `mnemo run` with no platform, and `mnemo chat` ------------------------


def test_mnemo_chat_answers_and_ends_with_its_input(fake: FakeOpenAI, tmp_path: Path) -> None:
    home = tmp_path / "data"
    fake.say("Good morning, Ada.")
    process = start_mnemo("chat", fake, home, grace=1)
    assert process.stdin is not None
    out, err = process.communicate("good morning\n", timeout=scaled(30))
    assert process.returncode == 0, err
    assert out.startswith("Mnemo console.") and "Good morning, Ada." in out
    assert err == ""  # `mnemo chat` logs warnings only
    assert sessions_of(home)[0][0] is True


def test_the_end_of_input_stops_an_in_process_run_and_frees_the_home(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    fake.say("One.")
    fake.say("Two.")
    home = tmp_path / "data"
    for _ in range(2):  # the second run would fail if the first kept the lock
        out = io.StringIO()
        run_console(config_for(fake, home), stdin=io.StringIO("hi\n"), stdout=out, user_id=USER)
    assert "Two." in out.getvalue()
    assert sessions_of(home)[0][1][-1] == ("assistant", "Two.")


# ----- adapters that fail ----------------------------------------------------------------


def test_an_adapter_that_fails_to_start_stops_the_service_with_one_line(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = config_for(fake, tmp_path / "data")
    with pytest.raises(AdapterFailedError) as raised:
        asyncio.run(Service(config, [_Idle(fail=OSError("no route"))], signals=()).run())
    assert str(raised.value) == "the idle adapter failed to start: OSError: no route"
    with instance_lock(tmp_path / "data"):  # released on the way out
        pass


def test_a_platform_adapter_that_ends_by_itself_is_a_failure(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = config_for(fake, tmp_path / "data")
    idle = _Idle(ends=True)
    with pytest.raises(AdapterFailedError, match="the idle adapter stopped by itself"):
        asyncio.run(Service(config, [idle], signals=()).run())
    assert idle.calls == ["start", "stop", "close"]
    assert {"help", "memory", "forget"} <= set(idle.commands)  # the menu…
    assert "promote" not in idle.commands  # …without the admins' commands


class _Idle:
    """A platform adapter that takes no updates; it may end by itself or fail to start."""

    platform = "idle"

    def __init__(self, ends: bool = False, fail: Exception | None = None) -> None:
        self.done = asyncio.Event()
        self.calls: list[str] = []
        self.commands: list[str] = []
        self._ends, self._fail = ends, fail

    async def start(self, inbox: Inbox, commands: Sequence[CommandSpec]) -> None:
        self.calls.append("start")
        if self._fail is not None:
            raise self._fail
        self.commands = [command.name for command in commands]
        if self._ends:
            asyncio.get_running_loop().call_later(0.05, self.done.set)

    async def stop(self) -> None:
        self.calls.append("stop")

    async def close(self) -> None:
        self.calls.append("close")

    async def notify(self, message: InboundMessage, text: str) -> None:
        pass

    def reply_sink(self, message: InboundMessage) -> ReplySink:
        raise AssertionError("nothing is left unanswered on this platform")


class _Gate:
    """The console adapter, started only when released, telling when it did."""

    platform = "console"

    def __init__(self, inner: ConsoleAdapter) -> None:
        self._inner = inner
        self.done = inner.done
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def start(self, inbox: Inbox, commands: Sequence[CommandSpec]) -> None:
        self.started.set()
        await self.release.wait()
        await self._inner.start(inbox, commands)

    async def stop(self) -> None:
        await self._inner.stop()

    async def close(self) -> None:
        await self._inner.close()

    async def notify(self, message: InboundMessage, text: str) -> None:
        await self._inner.notify(message, text)

    def reply_sink(self, message: InboundMessage) -> ReplySink:
        return self._inner.reply_sink(message)


def test_connections_the_loop_cannot_accept_are_one_counted_line_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    failures = AcceptFailures(clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    try:
        full = OSError(24, "Too many open files")
        context = {"message": "socket.accept() out of system resource", "exception": full}
        with caplog.at_level("WARNING", logger="mnemo"):
            for _ in range(50):
                failures.handle(loop, context)
            now[0] = 61.0
            failures.handle(loop, context)
    finally:
        loop.close()
    lines = [r.getMessage() for r in caplog.records if "could not accept" in r.getMessage()]
    assert lines == [
        "could not accept a connection: Too many open files (1 so far; the open-files limit?)",
        "could not accept a connection: Too many open files (51 so far; the open-files limit?)",
    ]
    assert all(r.exc_info is None for r in caplog.records)  # no traceback

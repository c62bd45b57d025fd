"""Running the real `mnemo` script as a person would, against loopback fakes.

`run_mnemo` starts the standalone fake model in a process of its own;
`FakesThread` serves in-process fakes on one event loop in a daemon thread, for
tests that inject messages into them and read their state while `mnemo run`
runs as a subprocess (`mnemo_run`).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tests.timing import scaled, wait_until_sync

ROOT = Path(__file__).resolve().parents[2]
MNEMO = Path(sys.executable).parent / "mnemo"
"""The `mnemo` script of this environment."""
T = TypeVar("T")


class Server(Protocol):
    async def start(self) -> Any: ...

    async def stop(self) -> None: ...


class FakesThread:
    """Fake servers on one event loop in a daemon thread; every access goes through it."""

    def __init__(self, servers: Sequence[Server]) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self._servers = tuple(servers)
        for server in self._servers:
            self.run(server.start)

    def run(self, coroutine: Callable[[], Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine(), self.loop).result(timeout=scaled(10))

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args)` on the fakes' loop (their state is not shared across threads)."""

        async def on_loop() -> T:
            return fn(*args, **kwargs)

        result: T = asyncio.run_coroutine_threadsafe(on_loop(), self.loop).result(
            timeout=scaled(10)
        )
        return result

    def wait(self, probe: Callable[[], T], timeout: float = 20.0) -> T:
        """Poll `probe` on the loop until it is truthy; its value."""
        return wait_until_sync(lambda: self.call(probe), timeout)

    def close(self) -> None:
        for server in self._servers:
            self.run(server.stop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=scaled(10))
        self.loop.close()


def dump_state(home: Path) -> str:
    """Every row of `home`/state.db, as SQL text (opened read-only)."""
    with sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True) as db:
        return "\n".join(db.iterdump())


def run_environment(model_url: str, workdir: Path, **tokens: str) -> dict[str, str]:
    """The environment of a `mnemo run` in `workdir`: the model at the fake `model_url`,
    data in `workdir`/data, the repository's skills, the platform tokens given (e.g.
    ``TELEGRAM_BOT_TOKEN="..."``) and no others, and no configuration file but
    `workdir`'s mnemo.yaml."""
    env = {**os.environ, **tokens}
    for name in ("TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "MNEMO_CONFIG"):
        if name not in tokens:
            env.pop(name, None)
    env.update(
        OPENAI_BASE_URL=model_url + "/v1",
        MNEMO_HOME=str(workdir / "data"),
        MNEMO_SKILLS_DIR=str(ROOT / "skills"),
        NO_PROXY="127.0.0.1,localhost",
    )
    return env


def mnemo_run(
    model_url: str, workdir: Path, *, stdout: int = subprocess.PIPE, **tokens: str
) -> subprocess.Popen[str]:
    """`mnemo run` started in `workdir` with `run_environment(model_url, workdir, **tokens)`:
    no stdin, its stderr piped, its stdout piped unless `stdout` says otherwise."""
    env = run_environment(model_url, workdir, **tokens)
    return subprocess.Popen(
        [str(MNEMO), "run"], stdin=subprocess.DEVNULL,
        stdout=stdout, stderr=subprocess.PIPE, text=True, env=env, cwd=workdir,
    )  # fmt: skip


def run_mnemo(
    command: str, stdin: str, *, home: Path, cwd: Path, user: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`mnemo <command>` with `stdin` typed in, its data in `home`, its model the fake
    OpenAI server started in a process of its own (`python -m tests.fakes.openai`).

    `user` is the console's login name (``$USER``), so the person is ``console-<user>``.
    """
    fake = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert fake.stdout is not None
        url = fake.stdout.readline().split()[-1]
        env = {**os.environ, "OPENAI_BASE_URL": url + "/v1", "MNEMO_HOME": str(home)}
        env["MNEMO_SKILLS_DIR"] = str(ROOT / "skills")  # `mnemo run` refuses a missing folder
        if user is not None:
            env.update(USER=user, LOGNAME=user)
        return subprocess.run(
            [str(MNEMO), *command.split()], input=stdin, env=env, capture_output=True,
            text=True, timeout=scaled(60), cwd=cwd,
        )  # fmt: skip
    finally:
        fake.terminate()
        fake.wait(timeout=scaled(10))

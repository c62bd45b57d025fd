"""The real `mnemo run` in webhook mode, its open files limited to 192, while 300 raw
connections send half a request head and then nothing: a real update is answered and
/healthz says ready while they are held, they are closed within the header timeout or
to make room, and the log holds a few counted lines, not a traceback per connection."""

from __future__ import annotations

import asyncio
import resource
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.openai import FakeOpenAI
from tests.fakes.telegram import FakeTelegram
from tests.gateway.processes import MNEMO, run_environment
from tests.timing import scaled, wait_until

pytestmark = pytest.mark.slow  # a mnemo run

TOKEN = "4242:slow-clients-token"
SECRET = "slow-clients-secret"
OPEN_FILES = 192  # the process's limit: 300 connections would exhaust it
HELD = 300
HEAD = b"POST /telegram HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def few_open_files() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, hard))


def start(tg: FakeTelegram, model: FakeOpenAI, workdir: Path, port: int, health: int) -> Any:
    (workdir / "mnemo.yaml").write_text(
        "telegram:\n"
        f"  base_url: {tg.url}/bot\n  base_file_url: {tg.url}/file/bot\n"
        "  allowed_users: ['*']\n  edit_interval: 0.05\n"
        "  webhook:\n    url: https://bot.example/telegram\n"
        f"    listen: 127.0.0.1\n    port: {port}\n"
        "    header_timeout: 5\n    max_connections: 64\n"
        f"health: {{enabled: true, listen: 127.0.0.1, port: {health}}}\n"
        "memory: {nudge_interval: 0}\nskills: {creation_nudge_interval: 0}\n",
        encoding="utf-8",
    )
    env = run_environment(
        model.url, workdir, TELEGRAM_BOT_TOKEN=TOKEN, TELEGRAM_WEBHOOK_SECRET=SECRET
    )
    with (workdir / "stderr.txt").open("w", encoding="utf-8") as log:
        return subprocess.Popen(
            [str(MNEMO), "run"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=log, text=True, env=env, cwd=workdir, preexec_fn=few_open_files,
        )  # fmt: skip


async def until(probe: Callable[[], object], timeout: float, what: str) -> None:
    await wait_until(probe, timeout, what, interval=0.05)


class Held:
    """A raw connection that sent half a head; `closed` once the server closed it."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()

    async def open(self, port: int) -> asyncio.StreamWriter:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(HEAD)
        asyncio.get_running_loop().create_task(self._read(reader))
        return writer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while await reader.read(4096):
                pass
        except ConnectionError:
            pass
        self.closed.set()


async def healthz(port: int) -> int:
    timeout = aiohttp.ClientTimeout(total=scaled(10))
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        http.get(f"http://127.0.0.1:{port}/healthz") as answer,
    ):
        return answer.status


async def test_held_half_sent_connections_neither_stop_updates_nor_healthz(
    tmp_path: Path,
) -> None:
    port, health = free_port(), free_port()
    async with FakeTelegram(token=TOKEN, webhook_backoff=0.05) as tg:
        model = FakeOpenAI(echo_when_idle=True)
        await model.start()
        tg.webhook_targets = [f"http://127.0.0.1:{port}/telegram"]
        process = start(tg, model, tmp_path, port, health)
        writers = []
        try:
            await until(lambda: tg.calls_to("setWebhook") or process.poll(), 120, "started")
            assert process.poll() is None, (tmp_path / "stderr.txt").read_text()
            held = [Held() for _ in range(HELD)]
            for connection in held:
                writers.append(await connection.open(port))
            tg.inject_text(42, 42, "through the crowd")
            await until(lambda: tg.chat_texts(42) == ["echo: through the crowd"], 30, "a reply")
            assert await healthz(health) == 200
            closed = sum(c.closed.is_set() for c in held)
            assert closed < HELD  # still held, the cap full
            await until(lambda: all(c.closed.is_set() for c in held), 30, "all closed")
            assert await healthz(health) == 200
        finally:
            for writer in writers:
                writer.close()
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=scaled(60))
            await model.stop()
    log = (tmp_path / "stderr.txt").read_text()
    assert "Traceback" not in log
    # the loop accepts a burst before the cap sees it: at the limit that is one line, counted
    assert log.count("Too many open files") <= 1, log
    counted = [line for line in log.splitlines() if "telegram: webhook:" in line]
    assert 2 <= len(counted) <= 4, counted  # each kind: the first, and the count at the end

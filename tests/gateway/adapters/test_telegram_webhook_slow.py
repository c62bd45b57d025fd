"""Webhook mode under slow and hostile clients: raw sockets on 127.0.0.1 that open
connections and send half a request (or nothing), more connections than the cap, and
bodies nested too deeply to decode. The real adapter; the fake Telegram POSTs updates."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.adapters.webhook_guard import NO_HEAD, OVER_CAP
from gateway.config import TelegramConfig
from tests.fakes.telegram import FakeTelegram
from tests.gateway.adapters.inboxes import Inbox
from tests.gateway.adapters.test_telegram_webhook import (
    ALICE,
    COMMANDS,
    SECRET,
    TOKEN,
    hook_url,
)
from tests.timing import scaled

HEAD = "POST /tg/hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN, webhook_backoff=0.01) as fake:
        yield fake


@asynccontextmanager
async def replica(tg: FakeTelegram, url: str, **limits: Any) -> AsyncIterator[TelegramAdapter]:
    port = int(url.split(":")[2].split("/")[0])
    config = TelegramConfig(
        token=TOKEN,
        base_url=tg.url + "/bot",
        base_file_url=tg.url + "/file/bot",
        edit_interval=0.05,
        allowed_users=("*",),
        webhook={"url": url, "listen": "127.0.0.1", "port": port, **limits},
        webhook_secret=SECRET,
    )
    adapter = TelegramAdapter(config)
    await adapter.start(Inbox(), COMMANDS)
    try:
        yield adapter
    finally:
        await adapter.close()


class Held:
    """One raw connection that sends `first` and then nothing; `closed` once the server
    closed it (`received`: what it answered before)."""

    def __init__(self, port: int, first: bytes) -> None:
        self.port, self.first = port, first
        self.received = b""
        self.closed = asyncio.Event()
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        self._writer.write(self.first)
        asyncio.get_running_loop().create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while chunk := await reader.read(4096):
                self.received += chunk
        except ConnectionError:
            pass
        self.closed.set()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def port_of(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


def half_sent(port: int, count: int) -> list[Held]:
    """`count` connections of three kinds: nothing sent, half a head, a whole head with
    the secret and half of its body."""
    whole = f"{HEAD}X-Telegram-Bot-Api-Secret-Token: {SECRET}\r\nContent-Length: 100\r\n\r\n"
    kinds = [b"", HEAD.encode(), whole.encode() + b'{"update_id": 1,']
    return [Held(port, kinds[i % 3]) for i in range(count)]


def warnings_of(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


async def test_idle_and_half_sent_connections_are_closed_and_updates_still_get_through(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    url = hook_url()
    tg.webhook_targets = [url]
    held = half_sent(port_of(url), 60)
    async with replica(tg, url, header_timeout=1.0, body_timeout=1.0, max_connections=100):
        for connection in held:
            await connection.open()
        tg.inject_text(ALICE, ALICE, "through the crowd")
        await tg.wait_until(lambda: tg.chat_texts(ALICE) == ["echo: through the crowd"])
        assert not any(c.closed.is_set() for c in held[:2])  # the update did not wait
        await asyncio.wait_for(asyncio.gather(*(c.closed.wait() for c in held)), scaled(10.0))
    for connection in held:
        connection.close()
    slow_bodies = held[2::3]
    assert all(c.received.startswith(b"HTTP/1.1 408") for c in slow_bodies)
    assert all(c.received == b"" for c in held if c not in slow_bodies)
    no_head = warnings_of(caplog, NO_HEAD)
    assert no_head[0].endswith("(1 so far)") and no_head[-1].endswith("(40 so far)")
    assert len(no_head) == 2  # the first, and the count at close: not a line each
    assert len(warnings_of(caplog, "body did not arrive in time")) == 2
    assert not [r for r in caplog.records if r.exc_info]


async def test_beyond_the_cap_the_oldest_idle_connections_make_room(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    """20 idle connections fill the cap; 15 more close the 15 oldest (the header timeout
    is far away); a real update is then served at once, its connection closing the 16th."""
    url = hook_url()
    tg.webhook_targets = [url]
    async with replica(tg, url, header_timeout=60.0, max_connections=20) as adapter:
        guard = adapter._webhook.guard if adapter._webhook else None
        assert guard is not None
        first = [Held(port_of(url), b"") for _ in range(20)]
        for connection in first:
            await connection.open()
        await tg.wait_until(lambda: guard.open == 20)
        later = [Held(port_of(url), HEAD.encode()) for _ in range(15)]
        for connection in later:
            await connection.open()
        await asyncio.wait_for(asyncio.gather(*(c.closed.wait() for c in first[:15])), scaled(10.0))
        tg.inject_text(ALICE, ALICE, "room for me")
        await tg.wait_until(lambda: tg.chat_texts(ALICE) == ["echo: room for me"])
        await asyncio.wait_for(first[15].closed.wait(), scaled(10.0))  # the room Telegram took
        assert not any(c.closed.is_set() for c in first[16:] + later)
        assert guard.open == 20
    for connection in first + later:
        connection.close()
    over = warnings_of(caplog, OVER_CAP)
    assert over[0].endswith("(1 so far)") and over[-1].endswith("(16 so far)")
    assert len(over) == 2  # the first, and the count at close


async def test_json_nested_too_deeply_is_400_without_a_traceback(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    url = hook_url()
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    bodies = [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000]
    async with replica(tg, url), aiohttp.ClientSession() as http:
        statuses = []
        for body in bodies:
            async with http.post(url, data=body, headers=headers) as answer:
                statuses.append(answer.status)
    assert statuses == [400, 400]
    assert not [r for r in caplog.records if r.exc_info]
    refused = warnings_of(caplog, "not a JSON object was refused")
    assert refused[-1].endswith("(2 so far)")


async def test_a_client_gone_in_the_middle_of_its_body_is_one_line_not_a_traceback(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    url = hook_url()
    async with replica(tg, url) as adapter:
        guard = adapter._webhook.guard if adapter._webhook else None
        assert guard is not None
        gone = [half_sent(port_of(url), 3)[2] for _ in range(2)]  # a head and half a body
        for connection in gone:
            await connection.open()
        await tg.wait_until(lambda: guard.reading == 2)
        for connection in gone:
            connection.close()
        await tg.wait_until(lambda: guard.open == 0)
    assert warnings_of(caplog, "closed while sending")[-1].endswith("(2 so far)")
    assert not [r for r in caplog.records if r.exc_info]

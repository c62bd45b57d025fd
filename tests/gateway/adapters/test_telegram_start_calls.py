"""Telegram's cosmetic calls at start (the commands menus) are never fatal (issue 36): a
flood-control 429 is waited out, a 404 right after getMe accepted the token is one log
line (not "the bot token was refused"), and the bot starts and answers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.config import TelegramConfig
from gateway.messages import CommandSpec
from tests.fakes.telegram import FakeTelegram
from tests.gateway.adapters.inboxes import Inbox

TOKEN = "123:ABC"
COMMANDS = [CommandSpec("help", "what the bot is"), CommandSpec("new", "start afresh")]


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as fake:
        yield fake


def adapter_for(tg: FakeTelegram) -> TelegramAdapter:
    config = TelegramConfig(
        token=TOKEN,
        base_url=tg.url + "/bot",
        base_file_url=tg.url + "/file/bot",
        edit_interval=0.05,
        allowed_users=("*",),
    )
    return TelegramAdapter(config, poll_timeout=1, backoff=(0.01, 0.05))


async def started_and_answering(tg: FakeTelegram, adapter: TelegramAdapter) -> None:
    assert adapter.ready.is_set() and not adapter.done.is_set()
    tg.inject_text(42, 42, "still here?")
    await tg.wait_until(lambda: tg.chat_texts(42) == ["echo: still here?"])


async def test_a_flood_wait_on_the_menu_is_waited_out(tg: FakeTelegram) -> None:
    tg.fail_next("setMyCommands", 429, retry_after=1)
    adapter = adapter_for(tg)
    await adapter.start(Inbox(), COMMANDS)
    try:
        await started_and_answering(tg, adapter)
    finally:
        await adapter.close()
    statuses = [call.status for call in tg.calls_to("setMyCommands")][:2]
    assert statuses == [429, 200]
    assert [c["command"] for c in tg.commands()] == ["help", "new"]


@pytest.mark.parametrize("status", [404, 400, 500])
async def test_a_refused_menu_is_one_line_and_the_bot_starts(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    tg.fail_next("setMyCommands", status)
    adapter = adapter_for(tg)
    with caplog.at_level(logging.INFO):
        await adapter.start(Inbox(), COMMANDS)
    try:
        await started_and_answering(tg, adapter)
    finally:
        await adapter.close()
    lines = [r.getMessage() for r in caplog.records]
    assert not [line for line in lines if "token was refused" in line]
    menu = [r for r in caplog.records if "commands menu was not set" in r.getMessage()]
    assert len(menu) == 1 and menu[0].exc_info is None


async def test_a_flood_wait_too_long_for_the_start_is_not_waited(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    tg.fail_next("setMyCommands", 429, retry_after=3600)
    adapter = adapter_for(tg)
    await adapter.start(Inbox(), COMMANDS)
    try:
        await started_and_answering(tg, adapter)
    finally:
        await adapter.close()
    assert [call.status for call in tg.calls_to("setMyCommands")] == [429]
    assert sum("commands menu was not set" in r.getMessage() for r in caplog.records) == 1


async def test_a_flood_wait_on_delete_webhook_is_waited_out(tg: FakeTelegram) -> None:
    tg.fail_next("deleteWebhook", 429, retry_after=1)
    adapter = adapter_for(tg)
    await adapter.start(Inbox(), COMMANDS)
    try:
        await started_and_answering(tg, adapter)
    finally:
        await adapter.close()
    assert [call.status for call in tg.calls_to("deleteWebhook")] == [429, 200]

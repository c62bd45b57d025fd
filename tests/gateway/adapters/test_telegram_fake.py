"""What the fake Telegram server gained for the adapter: its HTTP control API, drafts,
webhooks, blocked chats, migration and entity checks, against the real PTB `Bot`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from telegram import Bot, MessageEntity
from telegram.error import BadRequest, ChatMigrated, Conflict, Forbidden, RetryAfter

from tests.fakes.telegram import FakeTelegram

TOKEN = "123:ABC"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as fake:
        yield fake


@pytest.fixture
async def bot(tg: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(TOKEN, base_url=tg.url + "/bot", base_file_url=tg.url + "/file/bot") as b:
        yield b


async def test_control_api_injects_messages_scripts_failures_and_reads_state(
    tg: FakeTelegram, bot: Bot
) -> None:
    async with aiohttp.ClientSession(tg.url) as http:
        sticker = {
            "file_id": "f",
            "file_unique_id": "u",
            "type": "regular",
            "width": 1,
            "height": 1,
            "is_animated": False,
            "is_video": False,
        }
        async with http.post(
            "/_fake/message", json={"chat_id": 5, "user_id": 5, "sticker": sticker}
        ) as answer:
            update_id = (await answer.json())["update_id"]
        async with http.get("/_fake/pending") as answer:
            assert [u["update_id"] for u in await answer.json()] == [update_id]
        async with http.post("/_fake/fail", json={"method": "sendMessage", "retry_after": 3}):
            pass
        with pytest.raises(RetryAfter):
            await bot.send_message(5, "hi")
        await bot.send_message_draft(5, 11, "thinking")
        async with http.get("/_fake/drafts/5") as answer:
            assert await answer.json() == [{"draft_id": 11, "text": "thinking"}]
    [update] = await bot.get_updates(offset=0, timeout=0)
    assert update.message is not None and update.message.sticker is not None


async def test_drafts_only_in_private_chats(tg: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match="private"):
        await bot.send_message_draft(-100, 1, "no")
    assert tg.drafts == {}


async def test_an_active_webhook_refuses_get_updates(tg: FakeTelegram, bot: Bot) -> None:
    await bot.set_webhook("https://example.org/hook", secret_token="s")
    assert (await bot.get_webhook_info()).url == "https://example.org/hook"
    with pytest.raises(Conflict):
        await bot.get_updates(timeout=0)
    await bot.delete_webhook()
    assert await bot.get_updates(timeout=0) == ()


async def test_blocked_and_migrated_chats_fail_like_telegram(tg: FakeTelegram, bot: Bot) -> None:
    tg.block_chat(42)
    with pytest.raises(Forbidden):
        await bot.send_message(42, "hi")
    tg.inject_migration(-5, -1005)
    with pytest.raises(ChatMigrated) as moved:
        await bot.send_message(-5, "hi")
    assert moved.value.new_chat_id == -1005
    assert (await bot.send_message(-1005, "hi")).chat.id == -1005


async def test_entities_are_checked_in_utf16_units_and_kept(tg: FakeTelegram, bot: Bot) -> None:
    await bot.send_message(42, "😀 bold", entities=[MessageEntity("bold", 3, 4)])
    assert tg.chat_messages(42)[0].entities == [{"type": "bold", "offset": 3, "length": 4}]
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bot.send_message(42, "😀 bold", entities=[MessageEntity("bold", 3, 5)])

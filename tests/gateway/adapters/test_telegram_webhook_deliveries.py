"""Webhook deliveries of a command and of a button press through the real conversations:
each given to two replicas' listeners runs once, and the person sees one line.

Two webhook adapters serve one `Conversations` over one store (as after a restart, or
as two replicas would over one database); the fake Telegram delivers each update to
one and, once that one has answered, a copy to the other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.app import Services
from gateway.conversation import Conversations
from tests.fakes.telegram import FakeTelegram
from tests.gateway.adapters.test_telegram_webhook import BOB, hook_url, replica
from tests.gateway.serving import serving

FRESH = "Started a fresh session."
NOTICES_OFF = "Background notices: off (nothing is said when I learn something)."


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token="123:ABC", webhook_backoff=0.01) as fake:
        yield fake


async def twice(tg: FakeTelegram, conversations: Conversations, update: dict[str, Any]) -> None:
    """Once the first copy of `update` is answered, deliver it to the other listener and
    wait until both copies were handled to their end."""
    update_id = update["update_id"]
    await tg.wait_until(lambda: tg.webhook_answered(update_id) == 1)
    [first] = {a.target for a in tg.webhook_attempts if a.update_id == update_id}
    tg.deliver_again(update, next(t for t in tg.webhook_targets if t != first))
    await tg.wait_until(lambda: tg.webhook_answered(update_id) == 2)
    assert await conversations.drain(10)


async def test_a_command_and_a_press_delivered_to_two_listeners_each_run_once(
    tg: FakeTelegram, services: Services
) -> None:
    conversations = serving(services)
    first, second = hook_url(), hook_url()
    tg.webhook_targets = [first, second]
    async with replica(tg, conversations, first), replica(tg, conversations, second):
        await twice(tg, conversations, tg.inject_command(BOB, BOB, "/new"))
        assert tg.chat_texts(BOB) == [FRESH]
        tg.inject_command(BOB, BOB, "/settings")
        await tg.wait_until(lambda: len(tg.chat_texts(BOB)) == 2)
        shown = tg.chat_messages(BOB)[-1]
        assert shown.reply_markup is not None
        buttons = [b for row in shown.reply_markup["inline_keyboard"] for b in row]
        off = next(b["callback_data"] for b in buttons if b["text"] == "Notices: off")
        await twice(tg, conversations, tg.inject_callback_query(BOB, BOB, off, shown.message_id))
        await tg.wait_until(lambda: NOTICES_OFF in tg.chat_texts(BOB))
        assert await conversations.drain(10)
        assert tg.chat_texts(BOB)[2:] == [NOTICES_OFF]  # never "not valid any more" beside it
        assert tg.chat_texts(BOB).count(FRESH) == 1
        tg.inject_callback_query(BOB, BOB, off, shown.message_id)  # pressed again: a new press
        await tg.wait_until(lambda: len(tg.chat_texts(BOB)) == 4)
    assert "not valid any more" in (tg.chat_texts(BOB)[3] or "")  # told, not ignored

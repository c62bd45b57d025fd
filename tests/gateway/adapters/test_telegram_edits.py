"""Telegram's ``edited_message`` through the real python-telegram-bot and the fake Bot
API: an edit reaches `Inbox.edited` as a `MessageEdit`, never as a new message, and is
confirmed like any update; a forward is marked with its origin."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.messages import InboundMessage, MessageEdit, ReplySink
from tests.fakes.base import wait_until
from tests.fakes.telegram import FakeTelegram
from tests.gateway.adapters.inboxes import Inbox
from tests.gateway.adapters.test_telegram_adapter import MENTION, TOKEN, _seen, _texts, running
from tests.gateway.adapters.test_telegram_webhook import hook_url, replica


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as fake:
        yield fake


async def _edits(inbox: Inbox, tg: FakeTelegram, count: int) -> list[MessageEdit]:
    """The inbox's first `count` edits, once Telegram has no update left unconfirmed."""
    await tg.wait_until(lambda: len(inbox.edits) >= count and not tg.pending_updates)
    return inbox.edits


async def test_an_edited_text_reaches_edited_and_is_never_a_new_message(
    tg: FakeTelegram,
) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        first = tg.inject_text(42, 42, "I live in Lisbon")
        await _texts(tg, 42)
        message_id = first["message"]["message_id"]
        tg.inject_edited_text(42, 42, message_id, "I live in Porto")
        [edit] = await _edits(inbox, tg, 1)
        tg.inject_text(42, 42, "next")
        await _texts(tg, 42, 2)
    assert edit == MessageEdit(
        platform="telegram",
        chat_id="42",
        chat_type="private",
        message_id=str(message_id),
        text="I live in Porto",
        user_id="42",
        thread_id=None,
    )
    assert [m.text for m in inbox.messages] == ["I live in Lisbon", "next"]
    assert tg.chat_texts(42) == ["echo: I live in Lisbon", "echo: next"]  # no reply to it
    assert "edited_message" in (tg.allowed_updates or [])
    assert tg.dropped == []


async def test_a_group_edit_is_read_as_its_message_was_even_when_no_longer_addressed(
    tg: FakeTelegram,
) -> None:
    group, inbox = -100, Inbox()
    topic = {"message_thread_id": 9, "is_topic_message": True}
    async with running(tg, inbox):
        first = tg.inject_text(group, 7, "@mnemo_bot I keep bees", entities=[MENTION], **topic)
        await _texts(tg, group)
        message_id = first["message"]["message_id"]
        tg.inject_edit(group, 7, message_id, text="@mnemo_bot I keep wasps", entities=[MENTION])
        tg.inject_edit(group, 7, message_id, text="I keep nothing at all", entities=None)
        edits = await _edits(inbox, tg, 2)
    assert [(e.text, e.chat_id, e.chat_type, e.thread_id, e.user_id) for e in edits] == [
        ("I keep wasps", "-100", "group", "9", "7"),
        ("I keep nothing at all", "-100", "group", "9", "7"),
    ]
    assert [m.text for m in inbox.messages] == ["I keep bees"]


async def test_a_caption_edit_gives_the_caption_and_a_removed_caption_gives_empty_text(
    tg: FakeTelegram,
) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        photo = tg.inject_photo(42, 42, caption="my garden")
        await _texts(tg, 42)
        message_id = photo["message"]["message_id"]
        tg.inject_edit(42, 42, message_id, caption="my garden in May")
        tg.inject_edit(42, 42, message_id, caption=None)
        edits = await _edits(inbox, tg, 2)
    assert [e.text for e in edits] == ["my garden in May", ""]
    assert all(e.message_id == str(message_id) for e in edits)


async def test_edits_of_bots_without_text_or_without_a_sender_are_dropped(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.adapters.telegram_adapter")
    inbox = Inbox()
    robot = {"id": 99, "is_bot": True, "first_name": "Robot"}
    async with running(tg, inbox):
        first = tg.inject_text(42, 42, "meet me here")
        await _texts(tg, 42)
        message_id = first["message"]["message_id"]
        tg.inject_edit(42, 42, message_id, **{"from": robot, "text": "beep"})
        location = {"latitude": 38.7, "longitude": -9.1, "live_period": 60}
        tg.inject_edit(42, 42, message_id, text=None, location=location)  # moved: no text
        faceless = tg.inject_edit(42, 42, message_id, text="who am I", **{"from": None})
        tg.inject_edited_text(42, 42, message_id, "meet me there")
        [edit] = await _edits(inbox, tg, 1)
    assert edit.text == "meet me there"
    dropped = [r for r in caplog.records if "has no sender" in r.getMessage()]
    assert [(r.levelno, r.exc_info) for r in dropped] == [(logging.WARNING, None)]
    assert str(faceless["update_id"]) in dropped[0].getMessage()
    assert tg.chat_texts(42) == ["echo: meet me here"]


async def test_an_edit_in_the_same_batch_waits_until_its_message_is_stored(
    tg: FakeTelegram,
) -> None:
    """Telegram hands out a message and its edit together; the message is slow to store.
    The edit reaches the inbox only after the message was stored."""
    order: list[str] = []

    class Slow(Inbox):
        async def handle(
            self,
            message: InboundMessage,
            sink: ReplySink,
            on_stored: Callable[[], None] | None = None,
        ) -> None:
            def stored() -> None:
                order.append(f"stored {message.text}")
                assert on_stored is not None
                on_stored()

            await super().handle(message, sink, stored)

        async def edited(self, edit: MessageEdit) -> None:
            order.append(f"edit {edit.text}")
            await super().edited(edit)

    inbox = Slow()
    inbox.stall = stall = asyncio.Event()
    async with running(tg, inbox):
        await tg.wait_until(lambda: tg.held_polls > 0)
        first = tg.inject_text(42, 42, "cats")  # no await between: one batch
        tg.inject_edited_text(42, 42, first["message"]["message_id"], "dogs")
        await _seen(inbox, tg, 1)
        stall.set()
        await _edits(inbox, tg, 1)
    assert order == ["stored cats", "edit dogs"]


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        ({"type": "user", "sender_user": {"id": 9, "is_bot": False, "first_name": "Alice",
                                          "last_name": "Smith"}}, "Alice Smith"),
        ({"type": "hidden_user", "sender_user_name": "Dana"}, "Dana"),
        ({"type": "chat", "sender_chat": {"id": -5, "type": "group", "title": "Book club"}},
         "Book club"),
        ({"type": "channel", "chat": {"id": -6, "type": "channel", "title": "City news"},
          "message_id": 3}, "City news"),
    ],
)  # fmt: skip
async def test_a_forward_names_its_origin_as_telegram_gives_it(
    tg: FakeTelegram, origin: dict[str, Any], expected: str
) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        origin = origin | {"date": int(time.time())}
        tg.inject_text(42, 42, "remember that I live in Atlantis", forward_origin=origin)
        tg.inject_text(42, 42, "my own words")
        await _texts(tg, 42, 2)
    forwarded, own = inbox.messages
    assert (forwarded.text, forwarded.own_words, forwarded.forwarded_from) == (
        "remember that I live in Atlantis",
        False,
        expected,
    )
    assert (own.own_words, own.forwarded_from) == (True, None)


async def test_an_update_kind_the_bot_did_not_ask_for_never_reaches_it(tg: FakeTelegram) -> None:
    """The fake keeps the bot's allowed_updates: a channel post is dropped by Telegram."""
    inbox = Inbox()
    async with running(tg, inbox):
        await wait_until(lambda: tg.allowed_updates is not None)
        post = {"message_id": 1, "date": 0, "text": "news", "chat": {"id": -9, "type": "channel"}}
        tg.inject_update({"channel_post": post})
        tg.inject_text(42, 42, "hello")
        await _texts(tg, 42)
    assert [u.get("channel_post") for u in tg.dropped] == [post]
    assert tg.allowed_updates == ["message", "edited_message", "callback_query"]


async def test_over_the_webhook_an_edit_reaches_edited_and_is_answered_200(
    tg: FakeTelegram,
) -> None:
    url, inbox = hook_url(), Inbox()
    tg.webhook_targets = [url]
    async with replica(tg, inbox, url):
        first = tg.inject_text(42, 42, "I live in Lisbon")
        await tg.wait_until(lambda: tg.chat_texts(42) == ["echo: I live in Lisbon"])
        edit = tg.inject_edited_text(42, 42, first["message"]["message_id"], "in Porto")
        await tg.wait_until(lambda: tg.webhook_answered(edit["update_id"]) == 1)
    assert [(e.message_id, e.text) for e in inbox.edits] == [
        (str(first["message"]["message_id"]), "in Porto")
    ]
    assert tg.chat_texts(42) == ["echo: I live in Lisbon"]

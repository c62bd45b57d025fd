"""The Telegram adapter, with the real python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.config import TelegramConfig
from gateway.errors import AdapterFailedError, NotStoredError
from gateway.messages import Choice, CommandSpec, InboundMessage
from tests.fakes.telegram import FakeTelegram, utf16_len
from tests.gateway.adapters.inboxes import Inbox

TOKEN = "123:ABC"
COMMANDS = [
    CommandSpec("help", "what the bot is"),
    CommandSpec("new", "start a fresh conversation"),
]
MENTION = {"type": "mention", "offset": 0, "length": len("@mnemo_bot")}


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as fake:
        yield fake


def _config(tg: FakeTelegram, **fields: Any) -> TelegramConfig:
    values = {"token": TOKEN, "base_url": tg.url + "/bot", "base_file_url": tg.url + "/file/bot"}
    return TelegramConfig(**(values | {"edit_interval": 0.05, "allowed_users": ("*",)} | fields))


@asynccontextmanager
async def running(tg: FakeTelegram, inbox: Inbox, **fields: Any) -> AsyncIterator[TelegramAdapter]:
    adapter = TelegramAdapter(_config(tg, **fields), poll_timeout=1, backoff=(0.01, 0.05))
    await adapter.start(inbox, COMMANDS)
    try:
        yield adapter
    finally:
        await adapter.close()


async def _texts(tg: FakeTelegram, chat_id: int, count: int = 1) -> list[str | None]:
    return await tg.wait_until(
        lambda: len(tg.chat_texts(chat_id)) >= count and tg.chat_texts(chat_id)
    )


async def _seen(inbox: Inbox, tg: FakeTelegram, count: int) -> list[InboundMessage]:
    return await tg.wait_until(lambda: len(inbox.messages) >= count and inbox.messages)


async def test_private_text_is_answered_with_the_message_translated(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        sent = tg.inject_text(42, 42, "hello there")
        assert await _texts(tg, 42) == ["echo: hello there"]
    [message] = inbox.messages
    assert message == InboundMessage(
        platform="telegram",
        chat_id="42",
        chat_type="private",
        user_id="42",
        text="hello there",
        message_id=str(sent["message"]["message_id"]),
        user_name="User42",  # the fake's users have no username
        thread_id=None,
        bot_username="mnemo_bot",
        reply_to_id=None,
    )


async def test_the_commands_menu_is_registered(tg: FakeTelegram) -> None:
    async with running(tg, Inbox()):
        assert tg.commands() == [
            {"command": "help", "description": "what the bot is"},
            {"command": "new", "description": "start a fresh conversation"},
        ]


async def test_display_name_joins_first_and_last_name_or_falls_back_to_username(
    tg: FakeTelegram,
) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        named = {"id": 7, "is_bot": False, "first_name": "Ada", "last_name": "Lovelace"}
        tg.inject_text(7, 7, "a", **{"from": named})
        nameless = {"id": 8, "is_bot": False, "first_name": "", "username": "ghost"}
        tg.inject_text(8, 8, "b", **{"from": nameless})
        first, second = await _seen(inbox, tg, 2)
    assert (first.user_name, second.user_name) == ("Ada Lovelace", "ghost")


async def test_a_caption_is_read_as_the_text(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        tg.inject_photo(42, 42, caption="what is this?")
        assert await _texts(tg, 42) == ["echo: what is this?"]
    assert [m.text for m in inbox.messages] == ["what is this?"]


async def test_sticker_and_zip_document_reach_the_inbox_marked_unsupported(
    tg: FakeTelegram,
) -> None:
    """The inbox answers them with one line after its access check (see
    tests/gateway/test_inbox.py); here: they are marked, with no text and no media."""
    inbox = Inbox(lambda m: "cannot read that" if m.unsupported else f"echo: {m.text}")
    async with running(tg, inbox):
        sticker = tg.inject_sticker(42, 42)
        zipped = {"file_id": "z1", "file_unique_id": "uz1", "mime_type": "application/zip"}
        tg.inject_message(42, 42, document=zipped | {"file_name": "notes.zip", "file_size": 9})
        assert await _texts(tg, 42, 2) == ["cannot read that", "cannot read that"]
        tg.inject_text(42, 42, "and text")
        await _seen(inbox, tg, 3)
    assert [(m.text, m.unsupported) for m in inbox.messages] == [
        ("", True),
        ("", True),
        ("and text", False),
    ]
    assert all(m.media == () for m in inbox.messages)
    assert tg.chat_messages(42)[0].reply_to == sticker["message"]["message_id"]


async def test_channel_posts_and_bots_are_ignored_and_an_edit_is_no_new_message(
    tg: FakeTelegram,
) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        first = tg.inject_text(42, 42, "first")
        await _texts(tg, 42)
        tg.inject_edited_text(42, 42, first["message"]["message_id"], "first, edited")
        tg.inject_update(
            {
                "channel_post": {
                    "message_id": 1,
                    "date": 0,
                    "text": "news",
                    "chat": {"id": -900, "type": "channel"},
                }
            }
        )
        robot = {"id": 99, "is_bot": True, "first_name": "Robot"}
        tg.inject_text(43, 99, "beep", **{"from": robot})
        tg.inject_text(42, 42, "second")
        await _seen(inbox, tg, 2)
        await tg.wait_until(lambda: not tg.pending_updates)
    assert [m.text for m in inbox.messages] == ["first", "second"]
    assert [e.text for e in inbox.edits] == ["first, edited"]  # see test_telegram_edits


async def test_group_answers_only_what_is_addressed_to_the_bot(tg: FakeTelegram) -> None:
    inbox = Inbox()
    group = -100
    async with running(tg, inbox):
        tg.inject_text(group, 7, "people talking among themselves")
        tg.inject_text(group, 7, "@mnemo_bot what time is it?", entities=[MENTION])
        await _texts(tg, group)
        bot_message = tg.chat_messages(group)[0].message_id
        reply_to = {
            "message_id": bot_message,
            "date": 0,
            "chat": {"id": group, "type": "supergroup"},
            "from": {"id": 123, "is_bot": True, "first_name": "Mnemo"},
        }
        tg.inject_text(group, 7, "thanks", reply_to_message=reply_to)
        tg.inject_command(group, 7, "/help@otherbot")
        tg.inject_command(group, 7, "/help@mnemo_bot")
        tg.inject_command(group, 7, "/new")
        await _seen(inbox, tg, 4)
        await tg.wait_until(lambda: not tg.pending_updates)
    assert [m.text for m in inbox.messages] == [
        "what time is it?",
        "thanks",
        "/help@mnemo_bot",
        "/new",
    ]
    assert {m.chat_type for m in inbox.messages} == {"group"}
    assert inbox.messages[1].reply_to_id == str(bot_message)


async def test_group_trigger_all_reads_every_message(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox, group_trigger="all"):
        tg.inject_text(-100, 7, "people talking among themselves")
        await _seen(inbox, tg, 1)
    assert inbox.messages[0].text == "people talking among themselves"


async def test_forum_topic_messages_carry_the_thread_and_are_answered_there(
    tg: FakeTelegram,
) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        tg.inject_text(
            -100, 7, "@mnemo_bot hi", entities=[MENTION], message_thread_id=5, is_topic_message=True
        )
        await _texts(tg, -100)
    assert inbox.messages[0].thread_id == "5"
    assert [m.thread_id for m in tg.chat_messages(-100)] == [5]


async def test_an_update_is_confirmed_only_after_its_message_is_stored(tg: FakeTelegram) -> None:
    inbox = Inbox()
    inbox.stall = asyncio.Event()
    adapter = TelegramAdapter(_config(tg), poll_timeout=1, backoff=(0.01, 0.05))
    await adapter.start(inbox, COMMANDS)
    update = tg.inject_text(42, 42, "do not lose me")
    await _seen(inbox, tg, 1)
    assert [u["update_id"] for u in tg.pending_updates] == [update["update_id"]]
    await adapter.stop()
    inbox.fail_after_stall = True  # the process "dies" before storing the message
    inbox.stall.set()
    await adapter.close()
    assert [u["update_id"] for u in tg.pending_updates] == [update["update_id"]]

    again = Inbox()
    async with running(tg, again):
        assert await _texts(tg, 42) == ["echo: do not lose me"]
        await tg.wait_until(lambda: not tg.pending_updates)
    assert again.messages[0].message_id == str(update["message"]["message_id"])


async def test_a_button_press_is_answered_and_routed_to_choose(tg: FakeTelegram) -> None:
    inbox = Inbox()
    inbox.offer = (Choice("Yes", "choice:abcdefghijklmnopqrstuv"),)
    async with running(tg, inbox):
        tg.inject_text(42, 42, "forget it")
        message = await tg.wait_until(lambda: [m for m in tg.chat_messages(42) if m.reply_markup])
        keyboard = message[0].reply_markup["inline_keyboard"]
        assert keyboard == [[{"text": "Yes", "callback_data": "choice:abcdefghijklmnopqrstuv"}]]
        query = tg.inject_callback_query(
            42, 42, "choice:abcdefghijklmnopqrstuv", message[0].message_id
        )
        await tg.wait_until(lambda: inbox.chosen)
        await tg.wait_until(lambda: "chose choice:abcdefghijklmnopqrstuv" in tg.chat_texts(42))
    assert query["callback_query"]["id"] in tg.callback_answers
    chosen, payload = inbox.chosen[0]
    assert (chosen.chat_id, chosen.user_id, payload) == (
        "42",
        "42",
        "choice:abcdefghijklmnopqrstuv",
    )


async def test_a_button_of_a_previous_run_is_still_routed(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        tg.inject_text(42, 42, "hi")
        await _texts(tg, 42)
        tg.fail_next("answerCallbackQuery", 400, description="Bad Request: query is too old")
        tg.inject_callback_query(42, 42, "choice:old", tg.chat_messages(42)[0].message_id)
        await tg.wait_until(lambda: inbox.chosen)
    assert inbox.chosen[0][1] == "choice:old"


async def test_polling_survives_server_errors_and_logs_once(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.adapters.telegram_polling")
    for _ in range(3):
        tg.fail_next("getUpdates", 500)
    tg.inject_text(42, 42, "still there?")
    async with running(tg, Inbox()):
        assert await _texts(tg, 42) == ["echo: still there?"]
    assert [c.status for c in tg.calls_to("getUpdates")][:4] == [500, 500, 500, 200]
    failures = [r for r in caplog.records if "polling failed" in r.getMessage()]
    assert len(failures) == 1
    assert any("recovered" in r.getMessage() for r in caplog.records)


async def test_a_blocked_chat_does_not_stop_the_adapter(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        tg.block_chat(42)
        tg.inject_text(42, 42, "bye")
        tg.inject_text(43, 43, "hello")
        assert await _texts(tg, 43) == ["echo: hello"]
        await tg.wait_until(lambda: not tg.pending_updates)
    assert [m.text for m in inbox.messages] == ["bye", "hello"]
    assert tg.chat_texts(42) == []


async def test_a_reply_of_4096_emoji_arrives_as_two_messages(tg: FakeTelegram) -> None:
    text = "😀" * 4096
    async with running(tg, Inbox(reply=lambda m: text)):
        tg.inject_text(-100, 7, "@mnemo_bot emoji please", entities=[MENTION])
        texts = await tg.wait_until(
            lambda: "".join(t or "" for t in tg.chat_texts(-100)) == text and tg.chat_texts(-100)
        )
    assert len(texts) == 2
    assert all(utf16_len(t or "") <= 4096 for t in texts)


async def test_markdown_arrives_as_entities_with_utf16_offsets(tg: FakeTelegram) -> None:
    reply = "😀 **粗体** and `code`"
    async with running(tg, Inbox(reply=lambda m: reply)):
        tg.inject_text(42, 42, "format")
        await _texts(tg, 42)
    [message] = tg.chat_messages(42)
    assert message.text == "😀 粗体 and code"
    units = (message.text or "").encode("utf-16-le")
    spans = {
        e["type"]: units[2 * e["offset"] : 2 * (e["offset"] + e["length"])].decode("utf-16-le")
        for e in message.entities or []
    }
    assert spans == {"bold": "粗体", "code": "code"}


async def test_refused_entities_fall_back_to_plain_text(tg: FakeTelegram) -> None:
    async with running(tg, Inbox(reply=lambda m: "**bold** move")):
        tg.fail_next("sendMessage", 400, description="Bad Request: can't parse entities: no")
        tg.inject_text(42, 42, "format")
        await _texts(tg, 42)
    [message] = tg.chat_messages(42)
    assert (message.text, message.entities) == ("**bold** move", None)


async def test_a_migrated_group_is_reported_and_sends_follow_it(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox) as adapter:
        tg.inject_migration(-5, -1005)
        await tg.wait_until(lambda: inbox.migrations)
        old = InboundMessage("telegram", "-5", "group", "7", "x", message_id="1")
        await adapter.notify(old, "still here")
    assert inbox.migrations == [("telegram", "-5", "-1005"), ("telegram", "-5", "-1005")]
    assert tg.chat_texts(-1005) == ["still here"]


async def test_webhook_mode_takes_updates_with_the_secret_only(tg: FakeTelegram) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/tg-hook"
    inbox = Inbox()
    webhook = {"url": url, "listen": "127.0.0.1", "port": port}
    async with running(tg, inbox, webhook=webhook, webhook_secret="s3cret"):
        assert (tg.webhook["url"], tg.webhook["secret_token"]) == (url, "s3cret")
        update = tg.inject_text(42, 42, "via webhook")
        forged = tg.inject_text(42, 42, "forged")
        async with aiohttp.ClientSession() as http:
            wrong = {"X-Telegram-Bot-Api-Secret-Token": "guess"}
            async with http.post(url, json=forged, headers=wrong) as refused:
                assert refused.status == 403
            right = {"X-Telegram-Bot-Api-Secret-Token": "s3cret"}
            async with http.post(url, json=update, headers=right) as accepted:
                assert accepted.status == 200
        assert await _texts(tg, 42) == ["echo: via webhook"]
    assert [m.text for m in inbox.messages] == ["via webhook"]


async def test_a_refused_token_sets_done(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = TelegramAdapter(_config(tg, token="999:WRONG"), poll_timeout=1)
    await adapter.start(Inbox(), COMMANDS)
    try:
        assert adapter.done.is_set()
    finally:
        await adapter.close()
    assert any("token was refused" in r.getMessage() for r in caplog.records)


async def test_telegram_down_at_start_is_one_clear_error(tg: FakeTelegram) -> None:
    tg.fail_next("getMe", 502)
    adapter = TelegramAdapter(_config(tg), poll_timeout=1)
    with pytest.raises(AdapterFailedError, match="Telegram did not answer at start"):
        await adapter.start(Inbox(), COMMANDS)
    await adapter.close()
    assert not adapter.done.is_set()


async def test_flood_control_and_blocking_become_gateway_errors(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    message = InboundMessage("telegram", "42", "private", "42", "x", message_id="1")
    async with running(tg, Inbox()) as adapter:
        tg.fail_next("sendMessage", 429, retry_after=7)
        await adapter.notify(message, "one")
        tg.block_chat(42)
        await adapter.notify(message, "two")
    lines = [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()]
    assert len(lines) == 2
    assert "RateLimitedError" not in lines[0] and "wait 7 s" in lines[0]
    assert "blocked by the user" in lines[1]


async def test_reply_sink_answers_a_message_rebuilt_from_the_store(tg: FakeTelegram) -> None:
    stored = InboundMessage("telegram", "-100", "group", "7", "hi", message_id="99", thread_id="5")
    async with running(tg, Inbox()) as adapter:
        sink = adapter.reply_sink(stored)
        await sink.write("sorry for the wait")
        await sink.finish()
    [reply] = tg.chat_messages(-100)
    assert (reply.text, reply.thread_id, reply.reply_to) == ("sorry for the wait", 5, None)


async def test_an_export_file_arrives_as_a_document_after_the_text(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    export = tmp_path / "telegram-42-export.jsonl"
    export.write_bytes(b'{"kind": "memory"}\n')
    async with running(
        tg, Inbox(lambda m: "Everything I hold about you is in one file.", attach=export)
    ):
        tg.inject_text(42, 42, "/export")
        await tg.wait_until(lambda: tg.documents)
    assert tg.documents == [(42, "telegram-42-export.jsonl", b'{"kind": "memory"}\n')]
    assert tg.chat_texts(42)[0] == "Everything I hold about you is in one file."


async def test_a_quoted_block_arrives_as_quoted_lines(tg: FakeTelegram) -> None:
    """A blockquote entity (what the person pasted as a quote) reaches the inbox as "> "
    lines, which background learning does not take as the person's words."""
    quoted = "Dana: I'm allergic to peanuts 🥜\nand to cashews"
    text = f"{quoted}\nwhat can I cook for her?"
    block = {"type": "blockquote", "offset": 0, "length": utf16_len(quoted)}
    inbox = Inbox()
    async with running(tg, inbox):
        tg.inject_text(42, 42, text, entities=[block])
        tg.inject_text(
            -100,
            7,
            "@mnemo_bot see\nyou said so",
            entities=[MENTION, {**block, "offset": 15, "length": 11}],
        )
        await _texts(tg, 42)
        await _texts(tg, -100)
    assert [m.text for m in inbox.messages] == [
        "> Dana: I'm allergic to peanuts 🥜\n> and to cashews\nwhat can I cook for her?",
        "see\n> you said so",
    ]


async def test_the_apps_language_code_comes_with_messages_and_button_presses(
    tg: FakeTelegram,
) -> None:
    """The platform's hint, as Telegram gives it ("zh-hans"): the application negotiates
    it; a user whose app sends none has no hint."""
    inbox = Inbox()
    inbox.offer = (Choice("好", "choice:zh"),)
    tg.set_language(42, "zh-hans")
    async with running(tg, inbox):
        tg.inject_text(42, 42, "你好")
        tg.inject_text(43, 43, "hello")
        await _seen(inbox, tg, 2)
        buttons = await tg.wait_until(lambda: [m for m in tg.chat_messages(42) if m.reply_markup])
        tg.inject_callback_query(42, 42, "choice:zh", buttons[0].message_id)
        await tg.wait_until(lambda: inbox.chosen)
    by_user = {m.user_id: m.language for m in inbox.messages}
    assert by_user == {"42": "zh-hans", "43": None}
    pressed, _ = inbox.chosen[0]
    assert (pressed.user_id, pressed.language) == ("42", "zh-hans")


class Unstored(Inbox):
    """Its store is unavailable for the first `outage` messages that say "first"."""

    def __init__(self, outage: int) -> None:
        super().__init__()
        self.outage = outage

    async def handle(
        self, message: InboundMessage, sink: Any, on_stored: Callable[[], None] | None = None
    ) -> None:
        if message.text == "first" and self.outage > 0:
            self.outage -= 1
            self.messages.append(message)
            raise NotStoredError("the store is unavailable")
        await super().handle(message, sink, on_stored)


async def test_a_polled_update_not_stored_is_fetched_again_and_the_rest_is_handled_once(
    tg: FakeTelegram,
) -> None:
    inbox = Unstored(outage=2)
    first = tg.inject_text(42, 42, "first")
    tg.inject_text(43, 43, "second")  # same batch, stored at once
    async with running(tg, inbox):
        assert await _texts(tg, 42) == ["echo: first"]  # on the third fetch
        await tg.wait_until(lambda: not tg.pending_updates)  # confirmed once stored
    assert [m.text for m in inbox.messages].count("first") == 3
    assert tg.chat_texts(43) == ["echo: second"]  # fetched again, not handled again
    assert [m.text for m in inbox.messages].count("second") == 1
    offsets = [c.params.get("offset") for c in tg.calls_to("getUpdates")]
    assert offsets.count(first["update_id"]) >= 2  # the offset waited at the unstored one

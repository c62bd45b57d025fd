"""The fake Telegram Bot API, proven against the real python-telegram-bot."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dtm
import io
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telegram import (
    Bot,
    BotCommand,
    BotCommandScopeChat,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Update,
)
from telegram.constants import ChatAction
from telegram.error import BadRequest, Forbidden, InvalidToken, RetryAfter, TimedOut
from telegram.ext import (
    Application,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from tests.fakes.telegram import FakeTelegram, utf16_len
from tests.timing import scaled

TOKEN = "123:ABC"
ROOT = Path(__file__).resolve().parents[2]
Context = ContextTypes.DEFAULT_TYPE


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as fake:
        yield fake


@pytest.fixture
async def bot(tg: FakeTelegram) -> AsyncIterator[Bot]:
    async with _bot(tg.url) as plain:
        yield plain


@asynccontextmanager
async def _bot(url: str, token: str = TOKEN) -> AsyncIterator[Bot]:
    async with Bot(token, base_url=url + "/bot", base_file_url=url + "/file/bot") as plain:
        yield plain


@asynccontextmanager
async def running(tg: FakeTelegram, *handlers: Any) -> AsyncIterator[Application]:
    """A real Application polling the fake; fails if any handler raised."""
    app = (
        Application.builder()
        .token(TOKEN)
        .base_url(tg.url + "/bot")
        .base_file_url(tg.url + "/file/bot")
        .build()
    )
    errors: list[BaseException | None] = []

    async def on_error(update: object, context: Context) -> None:
        errors.append(context.error)

    app.add_handlers(list(handlers))
    app.add_error_handler(on_error)
    await app.initialize()
    await app.start()
    await app.updater.start_polling(timeout=1)
    try:
        yield app
    finally:
        await app.updater.stop()
        await app.stop()
        await app.shutdown()
    assert errors == []


async def test_handler_streams_a_reply_the_user_sees_in_full(tg: FakeTelegram) -> None:
    async def reply(update: Update, context: Context) -> None:
        await update.effective_chat.send_action(ChatAction.TYPING)
        placeholder = await update.message.reply_text("…")
        await placeholder.edit_text(f"You said: {update.message.text}")

    async with running(tg, MessageHandler(filters.TEXT, reply)):
        update = tg.inject_text(42, 42, "hello")
        await tg.wait_for("editMessageText")
        await tg.wait_until(lambda: not tg.pending_updates)  # confirmed by the next poll
    offsets = [c.params["offset"] for c in tg.calls_to("getUpdates")]
    assert offsets[0] == 0 and offsets[-1] == update["update_id"] + 1
    assert tg.chat_texts(42) == ["You said: hello"]
    assert tg.chat_messages(42)[0].edits == 1
    methods = [c.method for c in tg.calls]
    assert methods[:3] == ["getMe", "deleteWebhook", "getUpdates"]
    assert [m for m in methods if m != "getUpdates"][2:] == [
        "sendChatAction",
        "sendMessage",
        "editMessageText",
    ]
    assert tg.calls_to("sendChatAction")[0].params == {"chat_id": 42, "action": "typing"}


async def test_command_handler_receives_arguments(tg: FakeTelegram) -> None:
    seen: list[list[str]] = []

    async def start(update: Update, context: Context) -> None:
        seen.append(list(context.args or []))
        await update.message.reply_text("welcome")

    async with running(tg, CommandHandler("start", start)):
        update = tg.inject_command(7, 7, "/start deep-link two")
        await tg.wait_for("sendMessage")
    entity = update["message"]["entities"][0]
    assert entity == {"type": "bot_command", "offset": 0, "length": len("/start")}
    assert seen == [["deep-link", "two"]]
    assert tg.chat_texts(7) == ["welcome"]


async def test_group_reply_quotes_the_user_and_private_reply_does_not(tg: FakeTelegram) -> None:
    async def echo(update: Update, context: Context) -> None:
        await update.message.reply_text("ok")

    async with running(tg, MessageHandler(filters.TEXT, echo)):
        group = tg.inject_text(-100123, 5, "hi all")
        await tg.wait_for("sendMessage")
        tg.inject_text(5, 5, "hi bot")
        await tg.wait_for("sendMessage", count=2)
    group_call, private_call = tg.calls_to("sendMessage")
    user_message_id = group["message"]["message_id"]
    assert group["message"]["chat"]["type"] == "supergroup"
    assert group_call.params["reply_parameters"] == {"message_id": user_message_id}
    assert "reply_parameters" not in private_call.params
    (bot_message,) = tg.chat_messages(-100123)
    assert bot_message.reply_to == user_message_id
    assert bot_message.message_id == user_message_id + 1  # ids are shared per chat
    assert [m.from_bot for m in tg.chat_messages(-100123, include_user=True)] == [False, True]


async def test_edit_errors_match_telegram(tg: FakeTelegram, bot: Bot) -> None:
    message = await bot.send_message(9, "draft")
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_text("draft", chat_id=9, message_id=message.message_id)
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_text("draft \n", chat_id=9, message_id=message.message_id)
    with pytest.raises(BadRequest, match=r"(?i)message to edit not found"):
        await bot.edit_message_text("x", chat_id=9, message_id=message.message_id + 5)
    user = tg.inject_text(9, 9, "mine")
    with pytest.raises(BadRequest, match=r"(?i)can't be edited"):
        await bot.edit_message_text("x", chat_id=9, message_id=user["message"]["message_id"])
    edited = await bot.edit_message_text("final", chat_id=9, message_id=message.message_id)
    assert edited.text == "final" and edited.edit_date is not None
    assert tg.chat_texts(9) == ["final"]
    assert [c.status for c in tg.calls_to("editMessageText")] == [400, 400, 400, 400, 200]


async def test_delete_removes_the_message(tg: FakeTelegram, bot: Bot) -> None:
    first = await bot.send_message(3, "one")
    await bot.send_message(3, "two")
    assert await bot.delete_message(3, first.message_id) is True
    assert tg.chat_texts(3) == ["two"]
    with pytest.raises(BadRequest, match=r"(?i)message to delete not found"):
        await bot.delete_message(3, first.message_id)


async def test_injected_429_raises_retry_after(
    tg: FakeTelegram, bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")  # opt in to PTB's non-deprecated type
    tg.fail_next("sendMessage", retry_after=7)
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(1, "too fast")
    assert caught.value.retry_after == dtm.timedelta(seconds=7)
    failed = tg.calls_to("sendMessage")[0]
    assert failed.status == 429
    assert tg.chat_texts(1) == []
    tg.fail_next("sendMessage", status=403)
    with pytest.raises(Forbidden, match="blocked"):
        await bot.send_message(1, "blocked")
    await bot.send_message(1, "later")
    assert tg.chat_texts(1) == ["later"]


async def test_raw_fault_body_and_status(tg: FakeTelegram) -> None:
    tg.fail_next("sendMessage", retry_after=3)
    url = f"{tg.url}/bot{TOKEN}/sendMessage"
    async with aiohttp.ClientSession() as http, http.post(url, data={"chat_id": "1"}) as resp:
        assert resp.status == 429
        assert await resp.json() == {
            "ok": False,
            "error_code": 429,
            "description": "Too Many Requests: retry after 3",
            "parameters": {"retry_after": 3},
        }


async def test_confirmed_updates_are_delivered_once(tg: FakeTelegram) -> None:
    handled: Counter[str] = Counter()

    async def count(update: Update, context: Context) -> None:
        handled[update.message.text] += 1

    async with running(tg, MessageHandler(filters.TEXT, count)):
        for text in ("a", "b", "c"):
            tg.inject_text(11, 11, text)
        await tg.wait_until(lambda: sum(handled.values()) == 3)
        # Updates arrive in order, so a re-delivered a/b/c would be counted before "d".
        tg.inject_text(11, 11, "d")
        await tg.wait_until(lambda: handled["d"] == 1)
    assert handled == Counter({"a": 1, "b": 1, "c": 1, "d": 1})
    assert tg.pending_updates == []


async def test_get_updates_respects_offset_limit_and_timeout(tg: FakeTelegram, bot: Bot) -> None:
    ids = [tg.inject_text(2, 2, t)["update_id"] for t in ("x", "y", "z")]
    assert ids == sorted(ids) and len(set(ids)) == 3
    first_two = await bot.get_updates(limit=2)
    assert [u.update_id for u in first_two] == ids[:2]
    rest = await bot.get_updates(offset=ids[1] + 1)
    assert [u.message.text for u in rest] == ["z"]
    assert [u["update_id"] for u in tg.pending_updates] == [ids[2]]
    assert await bot.get_updates(offset=ids[2] + 1, timeout=0) == ()
    waiting = asyncio.create_task(bot.get_updates(offset=ids[2] + 1, timeout=5))
    await tg.wait_until(lambda: tg.held_polls == 1)
    tg.inject_text(2, 2, "late")
    (late,) = await asyncio.wait_for(waiting, scaled(2))  # woken by the update, not the 5 s timeout
    assert tg.held_polls == 0
    assert late.message.text == "late"


async def test_callback_query_is_answered(tg: FakeTelegram) -> None:
    async def on_button(update: Update, context: Context) -> None:
        await update.callback_query.answer("done")
        await update.callback_query.edit_message_text(f"chose {update.callback_query.data}")

    async with running(tg, CallbackQueryHandler(on_button)) as app:
        keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="yes")]])
        message = await app.bot.send_message(4, "Confirm?", reply_markup=keyboard)
        assert tg.chat_messages(4)[0].reply_markup == keyboard.to_dict()
        update = tg.inject_callback_query(4, 4, "yes", message.message_id)
        await tg.wait_for("editMessageText")
        query_id = update["callback_query"]["id"]
        assert tg.callback_answers[query_id]["text"] == "done"
        with pytest.raises(BadRequest, match=r"(?i)query id is invalid"):
            await app.bot.answer_callback_query(query_id)
        with pytest.raises(ValueError, match="no bot message 99"):
            tg.inject_callback_query(4, 4, "yes", 99)
    assert tg.chat_texts(4) == ["chose yes"]


async def test_updates_without_text_reach_a_catch_all_handler(tg: FakeTelegram) -> None:
    kinds: list[str] = []

    async def record(update: Update, context: Context) -> None:
        message = update.effective_message
        kind = "sticker" if message.sticker else "photo" if message.photo else "text"
        kinds.append("edited" if update.edited_message else kind)

    async with running(tg, MessageHandler(filters.ALL, record)) as app:
        sticker = tg.inject_sticker(-100500, 6)
        photo = tg.inject_photo(6, 6, content=b"png-bytes", caption="look")
        original = tg.inject_text(6, 6, "tpyo")
        edited = tg.inject_edited_text(6, 6, original["message"]["message_id"], "typo")
        await tg.wait_until(lambda: len(kinds) == 4)
        file = await app.bot.get_file(photo["message"]["photo"][-1]["file_id"])
        assert bytes(await file.download_as_bytearray()) == b"png-bytes"
    assert kinds == ["sticker", "photo", "text", "edited"]
    assert "text" not in sticker["message"] and sticker["message"]["chat"]["type"] == "supergroup"
    assert edited["edited_message"]["text"] == "typo"
    assert tg.chat_messages(6, include_user=True)[-1].text == "typo"


async def test_allowed_updates_is_kept_and_filters_later_updates(
    tg: FakeTelegram, bot: Bot
) -> None:
    """As on Telegram: the last getUpdates' ``allowed_updates`` holds until changed, and
    an update of a kind it does not name is never queued."""
    early = tg.inject_edited_text(1, 1, tg.inject_text(1, 1, "a")["message"]["message_id"], "b")
    await bot.get_updates(timeout=0, allowed_updates=["message"])
    edit = tg.inject_edited_text(1, 1, early["edited_message"]["message_id"], "c")
    kept = tg.inject_text(1, 1, "d")
    await bot.get_updates(timeout=0)  # not given: the previous setting holds
    edit_again = tg.inject_edited_text(1, 1, kept["message"]["message_id"], "e")
    await bot.get_updates(timeout=0, allowed_updates=[])  # empty: the default again
    last = tg.inject_edited_text(1, 1, kept["message"]["message_id"], "f")
    assert tg.dropped == [edit, edit_again]
    pending = [u["update_id"] for u in tg.pending_updates]
    assert edit["update_id"] not in pending and edit_again["update_id"] not in pending
    assert {early["update_id"], kept["update_id"], last["update_id"]} <= set(pending)


async def test_set_my_commands_is_stored_per_scope(tg: FakeTelegram, bot: Bot) -> None:
    await bot.set_my_commands([("start", "What I am"), ("recall", "Search our chats")])
    await bot.set_my_commands([("forget", "Forget me")], scope=BotCommandScopeChat(5))
    assert tg.commands() == [
        {"command": "start", "description": "What I am"},
        {"command": "recall", "description": "Search our chats"},
    ]
    assert tg.commands({"type": "chat", "chat_id": 5}) == [
        {"command": "forget", "description": "Forget me"}
    ]
    assert await bot.get_my_commands() == (
        BotCommand("start", "What I am"),
        BotCommand("recall", "Search our chats"),
    )
    await bot.delete_my_commands()
    assert await bot.get_my_commands() == ()


async def test_set_my_commands_is_stored_per_language_and_shown_by_the_control_api(
    tg: FakeTelegram, bot: Bot
) -> None:
    await bot.set_my_commands([("recall", "Search our chats")])
    await bot.set_my_commands([("recall", "搜索过去的对话")], language_code="zh")
    assert tg.commands(language_code="zh") == [
        {"command": "recall", "description": "搜索过去的对话"}
    ]
    assert tg.commands()[0]["description"] == "Search our chats"
    async with aiohttp.ClientSession() as http, http.get(f"{tg.url}/_fake/commands") as resp:
        menus = await resp.json()
    assert [(m["scope"], m["language_code"]) for m in menus] == [
        ({"type": "default"}, ""),
        ({"type": "default"}, "zh"),
    ]
    assert menus[1]["commands"] == [{"command": "recall", "description": "搜索过去的对话"}]


async def test_a_users_language_code_comes_with_what_they_send(tg: FakeTelegram, bot: Bot) -> None:
    tg.set_language(5, "zh-hans")
    tg.inject_text(5, 5, "你好")
    tg.inject_text(6, 6, "hello")
    async with aiohttp.ClientSession() as http:
        body = {"chat_id": 7, "user_id": 7, "text": "hola", "language_code": "es-419"}
        async with http.post(f"{tg.url}/_fake/text", json=body) as resp:
            assert resp.status == 200
    updates = await bot.get_updates(timeout=0)
    assert [u.message.from_user.language_code for u in updates] == ["zh-hans", None, "es-419"]
    tg.set_language(5, None)
    tg.inject_text(5, 5, "again")
    (later,) = await bot.get_updates(offset=updates[-1].update_id + 1, timeout=0)
    assert later.message.from_user.language_code is None


async def test_bad_texts_are_refused(tg: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)message text is empty"):
        await bot.send_message(8, " \n ")
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message(8, "😀" * 2049)  # 4,098 UTF-16 units
    await bot.send_message(8, "😀" * 2048)
    with pytest.raises(BadRequest, match=r"(?i)message to be replied not found"):
        await bot.send_message(8, "re", reply_parameters={"message_id": 999})
    assert tg.chat_texts(8) == ["😀" * 2048]


async def test_unknown_token_and_unknown_method(tg: FakeTelegram) -> None:
    with pytest.raises(InvalidToken):
        async with _bot(tg.url, token="999:WRONG"):
            pass
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{tg.url}/bot999:WRONG/getMe") as resp:
            assert resp.status == 401
            assert await resp.json() == {
                "ok": False,
                "error_code": 401,
                "description": "Unauthorized",
            }
        async with http.post(f"{tg.url}/bot{TOKEN}/sendTeleport") as resp:
            assert resp.status == 404
            assert (await resp.json())["description"] == "Not Found"
        body = {"chat_id": 77, "text": "via json"}
        async with http.post(f"{tg.url}/bot{TOKEN}/SENDMESSAGE", json=body) as resp:
            assert (await resp.json())["result"]["text"] == "via json"
    assert tg.chat_texts(77) == ["via json"]
    assert tg.calls[-1].method == "sendMessage"


async def test_wait_for_times_out(tg: FakeTelegram) -> None:
    with pytest.raises(TimeoutError):
        await tg.wait_for("sendMessage", timeout=0.05)


def test_any_text_arrives_as_sent() -> None:
    """Texts that look like JSON ("42", "null", "[1]") or hold any Unicode survive the wire."""
    loop = asyncio.new_event_loop()
    tg = FakeTelegram(token=TOKEN)
    loop.run_until_complete(tg.start())
    plain = Bot(TOKEN, base_url=tg.url + "/bot", base_file_url=tg.url + "/file/bot")
    loop.run_until_complete(plain.initialize())
    texts = st.one_of(
        st.sampled_from(["42", "null", "true", "[1, 2]", '{"a": 1}', "1e3"]), st.text()
    )

    @settings(max_examples=150, deadline=None)
    @given(text=texts.filter(lambda t: t.strip(" \t\n\r\f\v") and utf16_len(t) <= 4096))
    def check(text: str) -> None:
        sent = loop.run_until_complete(plain.send_message(12, text))
        assert sent.text == text.strip(" \t\n\r\f\v")
        assert tg.chat_texts(12)[-1] == sent.text

    try:
        check()
    finally:
        loop.run_until_complete(plain.shutdown())
        loop.run_until_complete(tg.stop())
        loop.close()


async def test_standalone_process_serves_a_real_bot() -> None:
    command = [sys.executable, "-m", "tests.fakes.telegram", "--port", "0"]
    proc = await asyncio.create_subprocess_exec(*command, cwd=ROOT, stdout=asyncio.subprocess.PIPE)
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), scaled(10))).decode().strip()
        assert line.startswith("listening on http://127.0.0.1:")
        url = line.removeprefix("listening on ")
        async with _bot(url, token="555:ANY") as remote:
            assert remote.username == "mnemo_bot"
            async with aiohttp.ClientSession() as http:
                body = {"chat_id": 3, "user_id": 3, "text": "/start"}
                async with http.post(f"{url}/_fake/text", json=body) as resp:
                    assert resp.status == 200
                async with http.post(f"{url}/_fake/text", json={"chat_id": 3}) as resp:
                    assert resp.status == 400
                (update,) = await remote.get_updates(timeout=1)
                assert update.message.text == "/start"
                assert update.message.entities[0].type == "bot_command"
                await remote.send_message(3, "hello from the bot")
                async with http.get(f"{url}/_fake/chats/3") as resp:
                    chat = await resp.json()
            assert [m["text"] for m in chat] == ["/start", "hello from the bot"]
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), scaled(10)) == 0


# -- media: what the Bot API sends, and the files behind it -------------------------------


def picture(width: int, height: int, kind: str = "JPEG") -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), "blue").save(out, format=kind)
    return out.getvalue()


async def download(bot: Bot, file_id: str) -> bytes:
    file = await bot.get_file(file_id)
    return bytes(await file.download_as_bytearray())


async def test_a_voice_note_arrives_as_telegram_sends_it_and_downloads(
    tg: FakeTelegram, bot: Bot
) -> None:
    audio = b"OggS voice bytes"
    message = tg.inject_voice(6, 6, audio, duration=4, caption="listen")["message"]
    assert message["voice"]["duration"] == 4  # PTB warns when its `duration` is read
    voice = Update.de_json({"update_id": 1, "message": message}, bot).message.voice
    assert (voice.mime_type, voice.file_size) == ("audio/ogg", len(audio))
    assert message["caption"] == "listen" and voice.file_unique_id.startswith("u")
    file = await bot.get_file(voice.file_id)
    assert file.file_path.endswith(".oga") and "/voice/" in file.file_path
    assert file.file_size == len(audio)
    assert bytes(await file.download_as_bytearray()) == audio
    assert tg.downloads == [voice.file_id]


async def test_audio_video_note_and_document_carry_their_fields(tg: FakeTelegram, bot: Bot) -> None:
    audio = tg.inject_audio(
        6, 6, b"ID3 song", duration=61, mime="audio/mp4", title="Song", performer="Me",
        file_name="memo.m4a", caption="my memo",
    )["message"]  # fmt: skip
    note = tg.inject_video_note(6, 6, b"mp4 round", duration=7, length=384)["message"]
    doc = tg.inject_document(6, 6, b"%PDF", "application/pdf", "plan.pdf", caption="the plan")
    parsed = Update.de_json({"update_id": 1, "message": audio}, bot).message.audio
    assert (parsed.title, parsed.performer, parsed.file_name) == ("Song", "Me", "memo.m4a")
    assert (parsed.mime_type, audio["audio"]["duration"]) == ("audio/mp4", 61)
    assert audio["caption"] == "my memo"
    video_note = Update.de_json({"update_id": 2, "message": note}, bot).message.video_note
    assert (video_note.length, note["video_note"]["duration"]) == (384, 7)
    assert "caption" not in note
    document = doc["message"]["document"]
    assert (document["file_name"], document["mime_type"]) == ("plan.pdf", "application/pdf")
    assert doc["message"]["caption"] == "the plan"
    assert await download(bot, parsed.file_id) == b"ID3 song"
    assert await download(bot, video_note.file_id) == b"mp4 round"
    assert await download(bot, document["file_id"]) == b"%PDF"
    assert (await bot.get_file(parsed.file_id)).file_path.endswith(".m4a")


async def test_a_photo_comes_in_several_sizes_each_its_own_file(tg: FakeTelegram, bot: Bot) -> None:
    original = picture(1000, 500)
    message = tg.inject_photo(6, 6, original, caption="our cat")["message"]
    sizes = Update.de_json({"update_id": 1, "message": message}, bot).message.photo
    assert [(p.width, p.height) for p in sizes] == [(90, 45), (320, 160), (800, 400), (1000, 500)]
    assert len({p.file_id for p in sizes}) == 4
    assert await download(bot, sizes[-1].file_id) == original
    small = await download(bot, sizes[0].file_id)
    assert small.startswith(b"\xff\xd8") and len(small) == sizes[0].file_size
    assert message["caption"] == "our cat"


async def test_photo_sizes_can_be_given_and_unreadable_bytes_give_one_size(
    tg: FakeTelegram, bot: Bot
) -> None:
    given_sizes = [(90, 60, b"small"), (800, 533, b"large")]
    photo = tg.inject_photo(6, 6, sizes=given_sizes)["message"]["photo"]
    assert [(p["width"], p["file_size"]) for p in photo] == [(90, 5), (800, 5)]
    assert await download(bot, photo[1]["file_id"]) == b"large"
    [one] = tg.inject_photo(6, 6, b"not a picture")["message"]["photo"]
    assert (one["width"], one["height"]) == (90, 90)


async def test_a_file_size_can_be_misreported_or_missing(tg: FakeTelegram, bot: Bot) -> None:
    lying = tg.inject_voice(6, 6, b"tiny", file_size=5_000_000)["message"]["voice"]
    silent = tg.inject_voice(6, 6, b"tiny", file_size=None)["message"]["voice"]
    assert lying["file_size"] == 5_000_000 and "file_size" not in silent
    assert (await bot.get_file(lying["file_id"])).file_size == 5_000_000
    file = await bot.get_file(silent["file_id"])
    assert file.file_size is None
    assert bytes(await file.download_as_bytearray()) == b"tiny"


async def test_get_file_refuses_files_over_20_mb(tg: FakeTelegram, bot: Bot) -> None:
    real = tg.inject_voice(6, 6, b"\0" * (20 * 1024 * 1024 + 1))["message"]["voice"]
    claimed = tg.inject_document(6, 6, b"x", "video/mp4", "film.mp4", file_size=30_000_000)
    for file_id in (real["file_id"], claimed["message"]["document"]["file_id"]):
        with pytest.raises(BadRequest, match=r"(?i)file is too big"):
            await bot.get_file(file_id)
    assert tg.downloads == []


async def test_a_broken_file_404s_on_download(tg: FakeTelegram, bot: Bot) -> None:
    voice = tg.inject_voice(6, 6, b"OggS")["message"]["voice"]
    tg.broken_files.add(voice["file_id"])
    file = await bot.get_file(voice["file_id"])  # getFile still answers, as on Telegram
    with pytest.raises(InvalidToken):  # PTB's error for a 404
        await file.download_as_bytearray()
    assert tg.downloads == [voice["file_id"]]


async def test_a_slow_file_is_held_until_released_or_its_time_is_up(
    tg: FakeTelegram, bot: Bot
) -> None:
    voice = tg.inject_voice(6, 6, b"OggS slow")["message"]["voice"]
    tg.slow_files[voice["file_id"]] = 30.0
    file = await bot.get_file(voice["file_id"])
    with pytest.raises(TimedOut):
        await file.download_as_bytearray(read_timeout=0.2)
    late = asyncio.create_task(file.download_as_bytearray())
    await tg.wait_until(lambda: tg.held_downloads == 1)
    assert not late.done()
    tg.release_files()
    assert bytes(await asyncio.wait_for(late, timeout=scaled(5))) == b"OggS slow"
    tg.slow_files[voice["file_id"]] = 0.05  # released: later downloads are not held
    assert await download(bot, voice["file_id"]) == b"OggS slow"


async def test_stop_releases_a_held_download() -> None:
    tg = FakeTelegram(token=TOKEN)
    await tg.start()
    voice = tg.inject_voice(6, 6, b"OggS")["message"]["voice"]
    tg.slow_files[voice["file_id"]] = 60.0
    async with _bot(tg.url) as bot:
        file = await bot.get_file(voice["file_id"])
        task = asyncio.create_task(file.download_as_bytearray())
        await tg.wait_until(lambda: tg.held_downloads == 1)
        await asyncio.wait_for(tg.stop(), timeout=scaled(5))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, timeout=scaled(5))
    assert task.done()


async def test_the_control_api_queues_a_voice_note_with_its_bytes(
    tg: FakeTelegram, bot: Bot
) -> None:
    body = {"chat_id": 6, "user_id": 6, "kind": "voice", "duration": 9, "caption": "hi"}
    body["content_base64"] = base64.b64encode(b"OggS via http").decode()
    async with aiohttp.ClientSession(tg.url) as http:
        async with http.post("/_fake/media", json=body) as answer:
            update = await answer.json()
        async with http.post("/_fake/media", json={**body, "kind": "sticker"}) as refused:
            assert refused.status == 400
    voice = update["message"]["voice"]
    assert (voice["duration"], update["message"]["caption"]) == (9, "hi")
    assert await download(bot, voice["file_id"]) == b"OggS via http"

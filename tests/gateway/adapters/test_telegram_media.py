"""Voice notes, audio and pictures on Telegram: the real python-telegram-bot against the
fake Bot API, which serves the files (getFile, then the file URL)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest

from gateway.adapters.media_download import read_capped
from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.config import TelegramConfig
from gateway.errors import MediaDownloadError, MediaTooLargeError
from gateway.i18n import Catalogs
from gateway.messages import InboundMessage, MediaRef, ReplySink
from tests.fakes.telegram import FakeTelegram
from tests.gateway.adapters.endless import EndlessFiles
from tests.gateway.adapters.inboxes import Inbox
from tests.timing import scaled

TOKEN = "123:ABC"
MiB = 2**20
MENTION = {"type": "mention", "offset": 0, "length": len("@mnemo_bot")}
GROUP = -100


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as fake:
        yield fake


@asynccontextmanager
async def running(
    tg: FakeTelegram,
    inbox: Any,
    download_timeout: float = scaled(5.0),
    files_url: str | None = None,
) -> AsyncIterator[TelegramAdapter]:
    """A started adapter; `files_url`: where its file downloads go (the fake's own)."""
    config = TelegramConfig(
        token=TOKEN,
        base_url=tg.url + "/bot",
        base_file_url=(files_url or tg.url) + "/file/bot",
        edit_interval=0.05,
        allowed_users=("*",),
    )
    adapter = TelegramAdapter(
        config, poll_timeout=1, backoff=(0.01, 0.05), download_timeout=download_timeout
    )
    await adapter.start(inbox, [])
    try:
        yield adapter
    finally:
        await adapter.close()


async def _seen(inbox: Inbox, tg: FakeTelegram, count: int) -> list[InboundMessage]:
    return await tg.wait_until(lambda: len(inbox.messages) >= count and inbox.messages)


def _file_id(update: dict[str, Any], kind: str) -> str:
    found = update["message"][kind]
    return str((found[-1] if isinstance(found, list) else found)["file_id"])


# ----- what arrives -------------------------------------------------------------------


async def test_a_voice_note_arrives_as_a_voice_media_ref_and_nothing_is_downloaded(
    tg: FakeTelegram,
) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        sent = tg.inject_voice(42, 42, b"OggS" + b"\x00" * 96, duration=7)
        [message] = await _seen(inbox, tg, 1)
        await tg.wait_until(lambda: tg.chat_texts(42))
    assert message.media == (
        MediaRef("voice", _file_id(sent, "voice"), "audio/ogg", 100, 7.0, None),
    )
    assert (message.text, message.unsupported) == ("", False)
    assert tg.calls_to("getFile") == [] and tg.downloads == []  # the application asks later


async def test_audio_video_note_and_documents_arrive_with_their_kind(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        audio = tg.inject_audio(42, 42, b"ID3" * 10, duration=61, file_name="song.mp3")
        note = tg.inject_video_note(42, 42, b"mp4" * 5, duration=4)
        png = tg.inject_document(42, 42, b"\x89PNG", "image/png", "scan.png", caption="a scan")
        ogg = tg.inject_document(42, 42, b"OggS", "audio/ogg", "memo.ogg")
        first, second, third, fourth = await _seen(inbox, tg, 4)
    assert first.media == (
        MediaRef("audio", _file_id(audio, "audio"), "audio/mpeg", 30, 61.0, "song.mp3"),
    )
    assert second.media == (MediaRef("voice", _file_id(note, "video_note"), "video/mp4", 15, 4.0),)
    assert third.media == (
        MediaRef("image", _file_id(png, "document"), "image/png", 4, name="scan.png"),
    )
    assert third.text == "a scan"
    assert fourth.media == (
        MediaRef("audio", _file_id(ogg, "document"), "audio/ogg", 4, name="memo.ogg"),
    )
    assert not any(m.unsupported for m in (first, second, third, fourth))


async def test_a_photo_is_its_largest_size_and_the_caption_its_text(tg: FakeTelegram) -> None:
    inbox = Inbox()
    sizes = [(90, 60, b"s" * 10), (320, 213, b"m" * 40), (800, 533, b"l" * 90)]
    async with running(tg, inbox) as adapter:
        sent = tg.inject_photo(42, 42, caption="what is in this picture?", sizes=sizes)
        [message] = await _seen(inbox, tg, 1)
        [media] = message.media
        assert await adapter.fetch_media(media, MiB) == b"l" * 90
    largest = sent["message"]["photo"][-1]
    assert media == MediaRef("image", largest["file_id"], "image/jpeg", 90)
    assert message.text == "what is in this picture?"


async def test_a_photo_size_over_the_bot_api_limit_is_not_chosen(tg: FakeTelegram) -> None:
    inbox = Inbox()
    sizes = [
        {"file_id": f"p{side}", "file_unique_id": f"u{side}", "width": side, "height": side}
        | ({"file_size": size} if size is not None else {})
        for side, size in ((90, 900), (1280, 1_000), (2560, None), (5000, 21 * MiB))
    ]
    async with running(tg, inbox):
        tg.inject_message(42, 42, photo=sizes)
        [message] = await _seen(inbox, tg, 1)
    assert message.media == (MediaRef("image", "p2560", "image/jpeg", None),)  # unknown fits


async def test_the_caption_loses_the_bot_mention_and_a_bare_mention_is_no_text(
    tg: FakeTelegram,
) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        caption = "@mnemo_bot what is this?"
        tg.inject_photo(GROUP, 42, caption=caption, caption_entities=[MENTION])
        tg.inject_voice(GROUP, 42, b"OggS", caption="@mnemo_bot", caption_entities=[MENTION])
        first, second = await _seen(inbox, tg, 2)
    assert (first.text, second.text) == ("what is this?", "")
    assert [m.media[0].kind for m in (first, second)] == ["image", "voice"]


async def test_in_a_group_a_voice_note_is_read_only_when_addressed(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox):
        tg.inject_text(GROUP, 42, "@mnemo_bot hi", entities=[MENTION])
        await _seen(inbox, tg, 1)
        [reply] = await tg.wait_until(lambda: tg.chat_messages(GROUP))
        tg.inject_voice(GROUP, 42, b"OggS", duration=2)  # to the room, not the bot
        bot_message = {
            "message_id": reply.message_id,
            "date": 0,
            "chat": {"id": GROUP, "type": "supergroup"},
            "from": {"id": tg.bot_id, "is_bot": True, "first_name": "Mnemo"},
            "text": reply.text,
        }
        tg.inject_voice(GROUP, 42, b"OggS!", duration=3, reply_to_message=bot_message)
        _, voice = await _seen(inbox, tg, 2)
        await tg.wait_until(lambda: len(tg.chat_messages(GROUP)) >= 2)
    assert [m.text for m in inbox.messages] == ["hi", ""]
    assert voice.media[0].seconds == 3.0 and voice.reply_to_id == str(reply.message_id)


async def test_a_sticker_a_video_and_a_zip_stay_unsupported(tg: FakeTelegram) -> None:
    inbox = Inbox()
    video = {"file_id": "v1", "file_unique_id": "uv1", "width": 1, "height": 1, "duration": 2}
    async with running(tg, inbox):
        tg.inject_sticker(42, 42)
        tg.inject_message(42, 42, video=video | {"mime_type": "video/mp4", "file_size": 9})
        tg.inject_document(42, 42, b"PK\x03\x04", "application/zip", "notes.zip")
        messages = await _seen(inbox, tg, 3)
    assert [(m.unsupported, m.media, m.text) for m in messages] == [(True, (), "")] * 3


# ----- fetching -------------------------------------------------------------------------


async def _voice(
    tg: FakeTelegram, adapter: TelegramAdapter, inbox: Inbox, content: bytes, **options: Any
) -> MediaRef:
    """Inject a voice note and return its MediaRef as the inbox got it."""
    tg.inject_voice(42, 42, content, **options)
    messages = await _seen(inbox, tg, len(inbox.messages) + 1)
    return messages[-1].media[0]


async def test_fetch_media_returns_the_voice_notes_bytes(tg: FakeTelegram) -> None:
    inbox = Inbox()
    content = bytes(range(256)) * 400  # 100 kB, several chunks
    async with running(tg, inbox) as adapter:
        media = await _voice(tg, adapter, inbox, content)
        assert await adapter.fetch_media(media, MiB) == content
        unsized = await _voice(tg, adapter, inbox, b"no size said", file_size=None)
        assert unsized.size is None
        assert await adapter.fetch_media(unsized, MiB) == b"no size said"
    assert tg.downloads == [media.ref, unsized.ref]


async def test_a_file_over_the_cap_is_refused_without_a_download(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox) as adapter:
        media = await _voice(tg, adapter, inbox, b"x" * 100, file_size=2 * MiB)
        with pytest.raises(MediaTooLargeError) as refused:
            await adapter.fetch_media(media, MiB)
    assert tg.calls_to("getFile") == [] and tg.downloads == []
    assert refused.value.line(Catalogs().translator("en")) == (
        "That file is too large: I can read files up to 1 MB."
    )
    assert "1 MB" in refused.value.line(Catalogs().translator("zh")) != str(refused.value)


async def test_getfiles_size_is_checked_again_before_the_download(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox) as adapter:
        media = await _voice(tg, adapter, inbox, b"x" * 100, file_size=None)
        tg.reported_sizes[media.ref] = 3 * MiB
        with pytest.raises(MediaTooLargeError, match="getFile says"):
            await adapter.fetch_media(media, MiB)
    assert len(tg.calls_to("getFile")) == 1 and tg.downloads == []


async def test_a_lying_size_is_refused_by_the_downloads_length(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox) as adapter:
        media = await _voice(tg, adapter, inbox, b"y" * (3 * MiB), file_size=1000)
        assert media.size == 1000
        with pytest.raises(MediaTooLargeError, match="HTTP says 3145728 bytes"):
            await adapter.fetch_media(media, MiB)
    assert tg.downloads == [media.ref]


async def test_a_download_without_a_length_is_cut_at_the_cap(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with EndlessFiles() as files, running(tg, inbox, files_url=files.url) as adapter:
        media = await _voice(tg, adapter, inbox, b"short", file_size=None)
        with pytest.raises(MediaTooLargeError, match="passed 1048576 bytes"):
            await adapter.fetch_media(media, MiB)  # endless: only the cap ends it
    assert files.requests == [f"/file/bot{TOKEN}/{tg.file_paths[media.ref]}"]


async def test_a_stream_longer_than_the_cap_is_cut_there() -> None:
    """A download whose length nobody said is read in chunks and stopped at the cap."""
    read: list[int] = []

    async def chunks() -> AsyncIterator[bytes]:
        for n in range(100):
            read.append(n)
            yield b"c" * 1000

    with pytest.raises(MediaTooLargeError, match="passed 4500 bytes"):
        await read_capped(chunks(), 4500)
    assert read == [0, 1, 2, 3, 4]  # the fifth chunk passed the cap; no sixth was asked for
    assert await read_capped(chunks(), 100_000) == b"c" * 100_000


async def test_the_bot_apis_file_is_too_big_is_the_too_large_line(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox) as adapter:
        media = await _voice(tg, adapter, inbox, b"z" * 10, file_size=None)
        tg.reported_sizes[media.ref] = 25 * MiB  # getFile refuses it, like the Bot API
        with pytest.raises(MediaTooLargeError, match="too big") as refused:
            await adapter.fetch_media(media, 50 * MiB)
    assert refused.value.values == {"limit": "50"}
    assert tg.downloads == []


async def test_a_missing_file_and_a_404_are_download_errors(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox) as adapter:
        media = await _voice(tg, adapter, inbox, b"gone")
        tg.broken_files.add(media.ref)
        with pytest.raises(MediaDownloadError, match="HTTP 404") as failed:
            await adapter.fetch_media(media, MiB)
        with pytest.raises(MediaDownloadError, match=r"(?i)invalid file_id"):
            await adapter.fetch_media(MediaRef("voice", "no-such-file"), MiB)
    assert TOKEN not in str(failed.value)  # the file URL holds the token; never logged
    assert failed.value.line(Catalogs().translator("es")) == (
        "No pude descargar ese archivo. Envíalo de nuevo, por favor."
    )


async def test_a_download_that_hangs_times_out(tg: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(tg, inbox, download_timeout=0.3) as adapter:
        media = await _voice(tg, adapter, inbox, b"slow")
        tg.slow_files[media.ref] = 30.0
        with pytest.raises(MediaDownloadError, match=r"within 0\.3 s"):
            await adapter.fetch_media(media, MiB)
        assert tg.downloads == [media.ref]
        tg.release_files()


class FetchingInbox(Inbox):
    """Downloads a message's media inside `handle` as the application does: after the
    message is kept (`on_stored`: the next getUpdates waits for it), and answers with the
    number of bytes it got."""

    def __init__(self) -> None:
        super().__init__(lambda m: f"got {m.text}")
        self.adapter: TelegramAdapter | None = None

    async def handle(
        self, message: InboundMessage, sink: ReplySink, on_stored: Callable[[], None] | None = None
    ) -> None:
        if message.media and self.adapter is not None:
            if on_stored is not None:
                on_stored()  # kept in the session queue before it is read
            data = await self.adapter.fetch_media(message.media[0], MiB)
            message = replace(message, text=f"{len(data)} bytes")
        await super().handle(message, sink, on_stored)


async def test_a_slow_download_in_one_chat_does_not_delay_another_chat(tg: FakeTelegram) -> None:
    inbox = FetchingInbox()
    async with running(tg, inbox) as adapter:
        inbox.adapter = adapter
        sent = tg.inject_voice(42, 42, b"v" * 500)
        tg.slow_files[_file_id(sent, "voice")] = 30.0
        await tg.wait_until(lambda: tg.held_downloads == 1)
        tg.inject_text(7, 7, "meanwhile")
        assert await tg.wait_until(lambda: tg.chat_texts(7)) == ["got meanwhile"]
        assert tg.held_downloads == 1 and tg.chat_texts(42) == []
        tg.release_files()
        assert await tg.wait_until(lambda: tg.chat_texts(42)) == ["got 500 bytes"]

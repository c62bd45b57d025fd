"""Voice messages, audio and pictures on Discord: the real discord.py against the fake
Discord, which serves each attachment's bytes at its URL (on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from gateway.adapters.discord_adapter import DiscordAdapter
from gateway.config import DiscordConfig
from gateway.errors import MediaDownloadError, MediaTooLargeError
from gateway.i18n import Catalogs
from gateway.messages import InboundMessage, MediaRef
from tests.fakes.discord import BOT_ID, DEFAULT_TOKEN, FakeDiscord, FakeFile, FakeGuild
from tests.gateway.adapters.endless import EndlessFiles
from tests.gateway.adapters.inboxes import Inbox
from tests.timing import scaled

ALICE = 4200000000000000001
GUILD = FakeGuild(id=1200000000000000001, channel_id=1200000000000000002)
MiB = 2**20
BOT = str(BOT_ID)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(guilds=(GUILD,)) as fake:
        yield fake


@asynccontextmanager
async def running(
    dc: FakeDiscord, inbox: Inbox, download_timeout: float = scaled(5.0)
) -> AsyncIterator[DiscordAdapter]:
    config = DiscordConfig(
        token=DEFAULT_TOKEN,
        api_base=dc.api_base,
        gateway_url=dc.gateway_url,
        edit_interval=0.05,
        allowed_users=("*",),
    )
    adapter = DiscordAdapter(
        config,
        guild_ready_timeout=0.05,
        ready_timeout=scaled(5),
        commands_factory=None,
        download_timeout=download_timeout,
    )
    await adapter.start(inbox, [])
    try:
        yield adapter
    finally:
        await adapter.close()


async def _seen(inbox: Inbox, dc: FakeDiscord, count: int) -> list[InboundMessage]:
    return await dc.wait_until(lambda: len(inbox.messages) >= count and inbox.messages)


def _bot_texts(dc: FakeDiscord, channel_id: int) -> list[str]:
    return [m["content"] for m in dc.channel_messages(channel_id) if m["author"]["id"] == BOT]


def _urls(sent: dict[str, Any]) -> list[str]:
    return [a["url"] for a in sent["attachments"]]


# ----- what arrives -------------------------------------------------------------------


async def test_a_voice_message_arrives_as_a_voice_media_ref_and_nothing_is_downloaded(
    dc: FakeDiscord,
) -> None:
    inbox = Inbox()
    async with running(dc, inbox):
        sent = await dc.inject_message("", ALICE, guild=False, voice=b"OggS" * 50)
        [message] = await _seen(inbox, dc, 1)
        await dc.wait_until(lambda: _bot_texts(dc, dc.dm_channel_id(ALICE)))
    [url] = _urls(sent)
    assert message.media == (MediaRef("voice", url, "audio/ogg", 200, 2.5, "voice-message.ogg"),)
    assert (message.text, message.unsupported) == ("", False)
    assert dc.downloads == []  # the application asks for the bytes later


async def test_audio_and_pictures_arrive_with_the_text_as_caption(dc: FakeDiscord) -> None:
    inbox = Inbox()
    files = {
        "talk.mp3": (b"ID3" * 10, "audio/mpeg"),
        "notes.zip": b"PK\x03\x04",  # neither sound nor picture: left out
        "cat.png": PNG,
        "dog.jpg": FakeFile(b"\xff\xd8\xff", "image/jpeg", width=4000, height=3000),
    }
    async with running(dc, inbox):
        sent = await dc.inject_message("what are these?", ALICE, mentions_bot=True, files=files)
        [message] = await _seen(inbox, dc, 1)
    talk, _, cat, dog = _urls(sent)
    assert message.text == "what are these?"  # the mention cut as for a text
    assert message.media == (
        MediaRef("audio", talk, "audio/mpeg", 30, None, "talk.mp3"),
        MediaRef("image", cat, "image/png", len(PNG), None, "cat.png"),
        MediaRef("image", dog, "image/jpeg", 3, None, "dog.jpg"),
    )


async def test_at_most_four_pictures_of_one_message_are_read(dc: FakeDiscord) -> None:
    inbox = Inbox()
    files = {f"p{n}.png": PNG for n in range(6)}
    async with running(dc, inbox):
        sent = await dc.inject_message("", ALICE, guild=False, files=files)
        [message] = await _seen(inbox, dc, 1)
    assert [m.ref for m in message.media] == _urls(sent)[:4]
    assert [m.name for m in message.media] == ["p0.png", "p1.png", "p2.png", "p3.png"]


async def test_a_file_without_content_type_is_read_by_its_name(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox):
        await dc.inject_message("", ALICE, guild=False, files={"memo.ogg": (b"OggS", "")})
        [message] = await _seen(inbox, dc, 1)
    assert [(m.kind, m.mime) for m in message.media] == [("audio", "audio/ogg")]


async def test_other_attachments_stay_unsupported_without_text(dc: FakeDiscord) -> None:
    inbox = Inbox(lambda m: "cannot read" if m.unsupported else f"echo: {m.text}")
    async with running(dc, inbox):
        await dc.inject_message("", ALICE, guild=False, files={"a.zip": b"PK"})
        await dc.inject_message("see the zip", ALICE, guild=False, files={"b.zip": b"PK"})
        dm = dc.dm_channel_id(ALICE)
        assert await dc.wait_until(lambda: len(_bot_texts(dc, dm)) >= 2 and _bot_texts(dc, dm))
    assert [(m.unsupported, m.media) for m in inbox.messages] == [(True, ()), (False, ())]
    assert _bot_texts(dc, dm) == ["cannot read", "echo: see the zip"]


# ----- fetching -------------------------------------------------------------------------


async def _media(dc: FakeDiscord, inbox: Inbox, file: FakeFile) -> MediaRef:
    """Send `file` in a DM and return its MediaRef as the inbox got it."""
    await dc.inject_message("", ALICE, guild=False, files={"clip.ogg": file})
    messages = await _seen(inbox, dc, len(inbox.messages) + 1)
    return messages[-1].media[0]


async def test_fetch_media_returns_the_attachments_bytes(dc: FakeDiscord) -> None:
    inbox = Inbox()
    content = bytes(range(256)) * 1000  # 256 kB, several chunks
    async with running(dc, inbox) as adapter:
        media = await _media(dc, inbox, FakeFile(content, "audio/ogg"))
        assert await adapter.fetch_media(media, MiB) == content
    assert len(dc.downloads) == 1


async def test_an_attachment_over_the_cap_is_refused_without_a_download(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox) as adapter:
        media = await _media(dc, inbox, FakeFile(b"x" * 2048, "audio/ogg"))
        with pytest.raises(MediaTooLargeError, match="Discord says 2048 bytes") as refused:
            await adapter.fetch_media(media, 1024)
    assert dc.downloads == []
    assert refused.value.line(Catalogs().translator("zh")) == (
        "这个文件太大了：我最多只能读取 0.00098 MB 的文件。"  # a tiny cap, for the test
    )


async def test_a_lying_size_is_refused_by_the_downloads_length(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox) as adapter:
        media = await _media(dc, inbox, FakeFile(b"y" * (2 * MiB), "audio/ogg", size=100))
        assert media.size == 100
        with pytest.raises(MediaTooLargeError, match="HTTP says 2097152 bytes"):
            await adapter.fetch_media(media, MiB)
    assert len(dc.downloads) == 1


async def test_a_download_without_a_length_is_cut_at_the_cap(dc: FakeDiscord) -> None:
    async with EndlessFiles() as files, running(dc, Inbox()) as adapter:
        media = MediaRef("audio", files.url + "/attachments/1/2/long.ogg", "audio/ogg")
        with pytest.raises(MediaTooLargeError, match="passed 1048576 bytes"):
            await adapter.fetch_media(media, MiB)  # endless: only the cap ends it
    assert files.requests == ["/attachments/1/2/long.ogg"]


async def test_a_404_and_a_hang_are_download_errors(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox, download_timeout=0.3) as adapter:
        gone = await _media(dc, inbox, FakeFile(b"gone", "audio/ogg"))
        dc.broken_files.add(gone.ref.split("/")[-2])
        with pytest.raises(MediaDownloadError, match="HTTP 404") as failed:
            await adapter.fetch_media(gone, MiB)
        slow = await _media(dc, inbox, FakeFile(b"slow", "audio/ogg"))
        dc.slow_files[slow.ref.split("/")[-2]] = 30.0
        with pytest.raises(MediaDownloadError, match=r"within 0\.3 s"):
            await adapter.fetch_media(slow, MiB)
        assert dc.held_downloads == 1
        dc.release_files()
    assert failed.value.line(Catalogs().translator("en")) == (
        "I could not download that file. Please send it again."
    )

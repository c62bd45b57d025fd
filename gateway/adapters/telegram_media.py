"""Voice notes, audio and pictures of a Telegram message, and their download.

`media_of` names what a message carries as `MediaRef`s without downloading
anything: a ``voice`` note, an ``audio`` file, a ``video_note`` (listened to, as
a voice note: its sound), a ``photo`` (one size: the largest the Bot API gives a
bot, at most 20 MB; the application's cap is applied by the download), and a
``document`` that is a picture or a sound. Stickers, videos, animations and
other documents give nothing (the message stays unsupported).

`TelegramFiles.fetch` downloads one into memory when the application asks:
refused before any request when Telegram's size is over the cap, then
``getFile`` (its size checked again), then the file URL read in chunks with a
running cap through httpx (the client stack python-telegram-bot uses), all under
one timeout.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
from telegram import Audio, Message, PhotoSize, Voice
from telegram.error import BadRequest, TelegramError

from gateway.adapters.media_download import (
    DOWNLOAD_TIMEOUT,
    not_fetched,
    read_capped,
    refuse_over,
    too_large,
)
from gateway.messages import MediaKind, MediaRef

BOT_API_LIMIT = 20 * 2**20  # bytes: the Bot API gives a bot no larger file
VIDEO_NOTE_MIME = "video/mp4"  # Telegram's round videos; the endpoint reads their sound


def media_of(message: Message) -> tuple[MediaRef, ...]:
    """What `message` carries that the bot can read (at most one thing on Telegram)."""
    if message.voice is not None:
        return (_sound("voice", message.voice),)
    if message.audio is not None:
        return (_sound("audio", message.audio),)
    note = message.video_note
    if note is not None:
        seconds = _seconds(note.duration)
        return (MediaRef("voice", note.file_id, VIDEO_NOTE_MIME, note.file_size, seconds),)
    if message.photo:
        return (_largest(message.photo),)
    document = message.document
    mime = (document.mime_type or "").lower() if document is not None else ""
    kind: MediaKind | None = (
        "image" if mime.startswith("image/") else "audio" if mime.startswith("audio/") else None
    )
    if document is None or kind is None:
        return ()
    return (MediaRef(kind, document.file_id, mime, document.file_size, name=document.file_name),)


def _sound(kind: MediaKind, sound: Voice | Audio) -> MediaRef:
    name = sound.file_name if isinstance(sound, Audio) else None
    return MediaRef(
        kind, sound.file_id, sound.mime_type, sound.file_size, _seconds(sound.duration), name
    )


def _seconds(duration: int | dt.timedelta | None) -> float | None:
    """A duration as PTB gives it (seconds, or a timedelta when PTB_TIMEDELTA is set)."""
    if isinstance(duration, dt.timedelta):
        return duration.total_seconds()
    return float(duration) if duration is not None else None


def _largest(sizes: Sequence[PhotoSize]) -> MediaRef:
    """The largest size a bot may download (its size unknown counts as fitting); the
    smallest when none fits, which the download then refuses."""
    fitting = [s for s in sizes if s.file_size is None or s.file_size <= BOT_API_LIMIT]
    pick = (
        max(fitting, key=lambda s: s.width * s.height)
        if fitting
        else min(sizes, key=lambda s: s.file_size or 0)
    )
    return MediaRef("image", pick.file_id, "image/jpeg", pick.file_size)


class TelegramFiles:
    """Downloads of one bot's files, through one httpx client opened at first use."""

    def __init__(self, timeout: float = DOWNLOAD_TIMEOUT) -> None:
        self._timeout = timeout
        self._client: httpx.AsyncClient | None = None

    async def fetch(self, bot: Any, media: MediaRef, max_bytes: int) -> bytes:
        """`media`'s bytes, at most `max_bytes` (see the module)."""
        refuse_over(media.size, max_bytes, "Telegram")
        try:
            async with asyncio.timeout(self._timeout):
                file = await bot.get_file(media.ref)
                refuse_over(file.file_size, max_bytes, "getFile")
                return await self._download(str(file.file_path or ""), max_bytes)
        except TimeoutError:
            raise not_fetched(f"no file within {self._timeout:g} s") from None
        except BadRequest as error:
            if "too big" in str(error).lower():
                raise too_large(max_bytes, f"getFile: {error}") from None
            raise not_fetched(f"getFile: {error}") from None
        except TelegramError as error:
            raise not_fetched(f"getFile: {type(error).__name__}: {error}") from None

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _download(self, url: str, max_bytes: int) -> bytes:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise not_fetched("getFile gave no file URL (a local Bot API server?)")
        url = urlunsplit(parts._replace(path=quote(parts.path)))
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout)
        try:
            async with self._client.stream("GET", url) as response:
                if response.status_code != 200:
                    raise not_fetched(f"the file answered HTTP {response.status_code}")
                length = response.headers.get("content-length")
                refuse_over(int(length) if length and length.isdigit() else None, max_bytes, "HTTP")
                return await read_capped(response.aiter_bytes(), max_bytes)
        except httpx.HTTPError as error:  # its text may hold the URL, and so the token
            raise not_fetched(f"the file download failed: {type(error).__name__}") from None

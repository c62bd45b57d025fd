"""Voice messages, audio and pictures attached to a Discord message, and their download.

`media_of` names the attachments the bot can read as `MediaRef`s without
downloading anything: a voice message (the message's voice flag, or an
attachment with a duration and a waveform) or another ``audio/*`` file, and
``image/*`` pictures, each its own `MediaRef`, at most `MAX_MEDIA` in the
order attached (the type is guessed from the file name when Discord gives
none). Other attachments give nothing.

`DiscordFiles.fetch` downloads one into memory when the application asks:
refused before any request when Discord's size is over the cap, then the
attachment's URL read in chunks with a running cap through aiohttp (the client
stack discord.py uses; `Attachment.read` would read it whole), under one
timeout.
"""

from __future__ import annotations

import asyncio
import mimetypes

import aiohttp
import discord

from gateway.adapters.media_download import (
    DOWNLOAD_TIMEOUT,
    not_fetched,
    read_capped,
    refuse_over,
)
from gateway.messages import MediaKind, MediaRef

MAX_MEDIA = 4  # attachments read of one message; the rest are left out
CHUNK = 64 * 1024


def media_of(message: discord.Message) -> tuple[MediaRef, ...]:
    """The readable attachments of `message`, as `MediaRef`s (see the module)."""
    voice = message.flags.voice
    found = (_attachment(a, voice) for a in message.attachments)
    return tuple(ref for ref in found if ref is not None)[:MAX_MEDIA]


def _attachment(attachment: discord.Attachment, voice: bool) -> MediaRef | None:
    mime = (attachment.content_type or "").split(";")[0].strip().lower()
    if not mime:
        mime = (mimetypes.guess_type(attachment.filename)[0] or "").lower()
    kind: MediaKind
    if mime.startswith("audio/") or attachment.is_voice_message():
        kind = "voice" if voice or attachment.is_voice_message() else "audio"
    elif mime.startswith("image/"):
        kind = "image"
    else:
        return None
    return MediaRef(
        kind,
        attachment.url,
        mime or None,
        attachment.size,
        attachment.duration,
        attachment.filename,
    )


class DiscordFiles:
    """Downloads of attachments, through one aiohttp session opened at first use."""

    def __init__(self, timeout: float = DOWNLOAD_TIMEOUT) -> None:
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    async def fetch(self, media: MediaRef, max_bytes: int) -> bytes:
        """`media`'s bytes, at most `max_bytes` (see the module)."""
        refuse_over(media.size, max_bytes, "Discord")
        if not media.ref.startswith(("https://", "http://")):
            raise not_fetched("the attachment has no http(s) URL")
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._timeout)
            )
        try:
            async with asyncio.timeout(self._timeout):
                async with self._session.get(media.ref) as response:
                    if response.status != 200:
                        raise not_fetched(f"the attachment answered HTTP {response.status}")
                    refuse_over(response.content_length, max_bytes, "HTTP")
                    return await read_capped(response.content.iter_chunked(CHUNK), max_bytes)
        except TimeoutError:
            raise not_fetched(f"no attachment within {self._timeout:g} s") from None
        except aiohttp.ClientError as error:
            raise not_fetched(f"the attachment download failed: {type(error).__name__}") from None

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

"""Reading a message's media: download, transcribe, decode and describe (see the package).

INTERFACE ONLY for now: helper M2 of issue 26 implements `MediaReader.read`; helper M3
wires it into the turn. The contract below is what both build against.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.config import MediaConfig
from gateway.messages import InboundMessage, MediaRef

Fetch = Callable[[str, MediaRef, int], Awaitable[bytes]]
"""(platform, media, max_bytes) -> the file's bytes: the adapter of that platform's
`fetch_media` (raises MediaTooLargeError / MediaDownloadError)."""


class Transcriber(Protocol):
    """An OpenAI-compatible transcription endpoint (`ModelClient.transcribe`)."""

    async def transcribe(self, audio: bytes, *, filename: str, mime: str | None) -> str: ...


class Describer(Protocol):
    """The auxiliary model, which writes a picture's short description once
    (`ModelClient.complete` with an image content part)."""

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        background: bool | None = None,
    ) -> str: ...


@dataclass(frozen=True)
class ReadMedia:
    """What a message with media becomes for its turn."""

    text: str
    """The person's message as stored: the caption (their own words), a transcript
    (`markers.spoken_text`), a picture's `markers.image_line` or `NOT_SHOWN_MARK`."""
    images: tuple[str, ...] = ()
    """``data:`` URLs of the pictures, scaled down, to show the model in this turn only
    (with ``llm.vision``); later turns read `text` instead."""


class MediaReader:
    """Turns a message's `MediaRef`s into `ReadMedia`, or a `MediaError` with the line."""

    def __init__(
        self,
        config: MediaConfig,
        *,
        vision: bool,
        fetch: Fetch,
        transcriber: Transcriber | None,
        describer: Describer | None,
    ) -> None:
        """`transcriber` None: ``media.transcription.model`` is unset, and a voice note
        gets one line naming it; `describer` None: pictures are not described."""
        self._config = config
        self._vision = vision
        self._fetch = fetch
        self._transcriber = transcriber
        self._describer = describer

    async def read(self, message: InboundMessage) -> ReadMedia:
        """`message` (with media) as its turn stores and shows it; raises `MediaError`."""
        raise NotImplementedError("issue 26, helper M2")

"""Fakes of what the media reader is given: the adapters' fetch, a transcriber, a describer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import MediaError, ModelError
from gateway.messages import MediaRef


@dataclass
class FakeFetch:
    """Serves `files` by ref; `error` raised instead; `hold` waited on first (a slow download)."""

    files: dict[str, bytes] = field(default_factory=dict)
    error: MediaError | None = None
    hold: asyncio.Event | None = None
    calls: list[tuple[str, MediaRef, int]] = field(default_factory=list)
    done: int = 0  # downloads that returned

    async def __call__(self, platform: str, media: MediaRef, max_bytes: int) -> bytes:
        self.calls.append((platform, media, max_bytes))
        if self.hold is not None:
            await self.hold.wait()
        if self.error is not None:
            raise self.error
        self.done += 1
        return self.files[media.ref]


@dataclass
class FakeTranscriber:
    """Answers `texts` in order, or raises `error`; records each upload."""

    texts: list[str] = field(default_factory=list)
    error: ModelError | None = None
    uploads: list[tuple[bytes, str, str | None]] = field(default_factory=list)

    async def transcribe(self, audio: bytes, *, filename: str, mime: str | None) -> str:
        self.uploads.append((audio, filename, mime))
        if self.error is not None:
            raise self.error
        return self.texts.pop(0)


@dataclass
class FakeDescriber:
    """The auxiliary model: answers `text`, raises `error`, or waits on `hold` forever."""

    text: str = "a red and blue flag"
    error: ModelError | None = None
    hold: asyncio.Event | None = None
    calls: list[tuple[list[dict[str, Any]], int | None, bool | None]] = field(default_factory=list)

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        background: bool | None = None,
    ) -> str:
        self.calls.append((list(messages), max_tokens, background))
        if self.hold is not None:
            await self.hold.wait()
        if self.error is not None:
            raise self.error
        return self.text

"""What the platform adapters share to fetch a voice note or a picture into memory.

A file is refused before any byte is read when the platform already says it is over
the cap, and read in chunks with a running count otherwise, so a size that lies (or
none at all) never makes an adapter hold more than ``media.max_bytes``. Failures are
`MediaTooLargeError` and `MediaDownloadError` with the person's line; their detail
(for the log) never holds a file's URL, which on Telegram carries the bot's token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from gateway.errors import MediaDownloadError, MediaTooLargeError
from gateway.i18n import N_

TOO_LARGE = N_("That file is too large: I can read files up to {limit} MB.")
NOT_FETCHED = N_("I could not download that file. Please send it again.")
DOWNLOAD_TIMEOUT = 30.0  # seconds, the default of media.download_timeout


def megabytes(count: int) -> str:
    """`count` bytes in MB (MiB) as a person reads it: "20", "2.5", "0.5", "0.00098"."""
    mb = count / 2**20
    return f"{mb:.1f}".removesuffix(".0") if mb >= 1 else f"{mb:.2g}"


def too_large(max_bytes: int, detail: str) -> MediaTooLargeError:
    """The refusal of a file over `max_bytes`; `detail` says how it was seen."""
    return MediaTooLargeError(TOO_LARGE, detail, limit=megabytes(max_bytes))


def not_fetched(detail: str) -> MediaDownloadError:
    """The platform could not give the file; `detail` (no URL) says why."""
    return MediaDownloadError(NOT_FETCHED, detail)


def refuse_over(size: int | None, max_bytes: int, said_by: str) -> None:
    """Raise `MediaTooLargeError` when the platform's `size` is over `max_bytes`."""
    if size is not None and size > max_bytes:
        raise too_large(max_bytes, f"{said_by} says {size} bytes, over {max_bytes}")


async def read_capped(chunks: AsyncIterator[bytes], max_bytes: int) -> bytes:
    """The chunks joined, stopping with `MediaTooLargeError` as soon as they pass
    `max_bytes` (the rest is never read)."""
    data = bytearray()
    async for chunk in chunks:
        data += chunk
        if len(data) > max_bytes:
            raise too_large(max_bytes, f"the download passed {max_bytes} bytes")
    return bytes(data)

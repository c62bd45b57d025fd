"""What the delivery layer needs of a platform: one chat to send, edit and draft in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gateway.delivery.splitting import utf16_units
from gateway.messages import Choice


@dataclass(frozen=True)
class ChannelLimits:
    """How much one message holds and how often a chat may be updated."""

    max_units: int  # 4096 for Telegram (UTF-16 units), 2000 for Discord
    units: Callable[[str], int] = utf16_units
    edit_interval: float = 1.0  # seconds between updates (edits, drafts) in one chat
    drafts: bool = False  # the chat takes native drafts (Telegram private chats)


class Channel(Protocol):
    """One chat, as each adapter implements it.

    Texts are Markdown source: the adapter renders them (images as links,
    `links.images_as_links`), and falls back to plain text itself when the
    platform rejects the formatting. `previews` says whether the message may show
    link previews or embeds; it is off unless the caller found every link in the
    text trusted (`links.previews_allowed`), so a caller that never asks sends
    none. Every method raises
    `RateLimitedError` (with `retry_after`) for flood control and `DeliveryError`
    for any other refusal (blocked, bad request, server errors after the
    adapter's own retries, network).
    """

    limits: ChannelLimits

    async def send(
        self,
        text: str,
        *,
        reply_to: str | None = None,
        choices: Sequence[Choice] = (),
        previews: bool = False,
    ) -> str:
        """A new message (replying to `reply_to`, with `choices` as buttons); its id."""

    async def edit(self, message_id: str, text: str, *, previews: bool = False) -> None:
        """Replace the text of a message this channel sent (and whether it shows previews)."""

    async def draft(self, draft_id: int, text: str) -> None:
        """Show `text` as the draft `draft_id` (only called when `limits.drafts`)."""

    async def typing(self) -> None:
        """Show that the bot is writing (the platform clears it by itself)."""

    async def send_document(self, path: Path) -> str:
        """Send the file at `path` as a document; the new message's id."""

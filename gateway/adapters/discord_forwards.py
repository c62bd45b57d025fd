"""A forwarded Discord message: the text it carries and where it came from.

Discord sends a forward as a message of its own with no content, a reference of
type "forward" and the forwarded message's text in its snapshots. The snapshot
names no author, so the origin is only where the reference points: "#<channel>"
for a channel the bot can see, else "another server" or "another channel".
"""

from __future__ import annotations

from dataclasses import dataclass

import discord


@dataclass(frozen=True)
class Forward:
    """What a forward carries: `text` (the snapshots', joined) and `origin`."""

    text: str
    origin: str


def forward_of(message: discord.Message, client: discord.Client) -> Forward | None:
    """`message`'s forward (None: it is no forward, or it carries no text)."""
    reference = message.reference
    if reference is None or reference.type is not discord.MessageReferenceType.forward:
        return None
    texts = [snapshot.content for snapshot in message.message_snapshots if snapshot.content]
    if not texts:
        return None
    return Forward("\n\n".join(texts), _origin(message, reference, client))


def _origin(
    message: discord.Message, reference: discord.MessageReference, client: discord.Client
) -> str:
    name = getattr(client.get_channel(reference.channel_id), "name", None)
    if isinstance(name, str) and name:
        return f"#{name}"
    here = message.guild.id if message.guild is not None else None
    elsewhere = reference.guild_id is not None and reference.guild_id != here
    return "another server" if elsewhere else "another channel"

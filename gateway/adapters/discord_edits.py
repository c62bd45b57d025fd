"""Discord's message edits and deletions as `MessageEdit`s, from discord.py's raw events.

The raw events come for every message, cached or not (a message from before a
restart too). An edit counts only when its text changed: against the cached
version when discord.py has one, else when Discord marks the message edited
(``edited_timestamp``; an embed loading or a pin is no edit of the text).
Messages of bots (the bot's own included), webhooks and the system are left
out, and so is every server outside ``discord.allowed_guilds``. A deletion does
not say who wrote the message: it is the author's when the cached copy says
so, else the author is left unknown (a deleted message of a bot that is not
cached reaches the inbox, which finds no person's message of that id). A
bulk deletion is one `MessageEdit` per message.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import discord

from gateway.messages import MessageEdit

Wanted = Callable[[discord.Message], bool]
"""Whether a message is a person's in an allowed place (the adapter's filter)."""


def edit_of(
    event: discord.RawMessageUpdateEvent, client: discord.Client, wanted: Wanted
) -> MessageEdit | None:
    """The edit `event` makes of a person's message's text (None: no such edit)."""
    message, before = event.message, event.cached_message
    if not wanted(message) or client.user is None:
        return None
    if before is not None and before.content == message.content:
        return None
    if before is None and message.edited_at is None:
        return None
    chat_id, thread_id = _where(client, event.channel_id)
    return MessageEdit(
        platform="discord",
        chat_id=chat_id,
        chat_type="group" if "guild_id" in event.data else "private",
        message_id=str(event.message_id),
        text=without_mention(message.content, client.user),
        user_id=str(message.author.id),
        thread_id=thread_id,
    )


def deletions_of(
    event: discord.RawMessageDeleteEvent | discord.RawBulkMessageDeleteEvent,
    client: discord.Client,
    wanted: Wanted,
    allowed_guilds: tuple[str, ...],
) -> list[MessageEdit]:
    """One `MessageEdit` (text None) per deleted message that may be a person's."""
    guild = event.guild_id
    if guild is not None and allowed_guilds and str(guild) not in allowed_guilds:
        return []
    if isinstance(event, discord.RawMessageDeleteEvent):
        ids = {event.message_id}
        cached = [] if event.cached_message is None else [event.cached_message]
    else:
        ids, cached = set(event.message_ids), list(event.cached_messages)
    authors = {m.id: m for m in cached}
    chat_id, thread_id = _where(client, event.channel_id)
    deleted = []
    for message_id in sorted(ids):
        known = authors.get(message_id)
        if known is not None and not wanted(known):
            continue
        deleted.append(
            MessageEdit(
                platform="discord",
                chat_id=chat_id,
                chat_type="private" if guild is None else "group",
                message_id=str(message_id),
                text=None,
                user_id=None if known is None else str(known.author.id),
                thread_id=thread_id,
            )
        )
    return deleted


def without_mention(text: str, me: discord.ClientUser) -> str:
    """`text` with the bot's mention cut out (as a new message's is)."""
    stripped = re.sub(rf"<@!?{me.id}>", " ", text)
    return re.sub(r"[ \t]{2,}", " ", stripped).strip()


def _where(client: discord.Client, channel_id: int) -> tuple[str, str | None]:
    """(chat id, thread id) of a channel: a thread's parent and the thread, else the
    channel (a thread discord.py does not know is taken for a channel)."""
    channel = client.get_channel(channel_id)
    if isinstance(channel, discord.Thread):
        return str(channel.parent_id), str(channel.id)
    return str(channel_id), None

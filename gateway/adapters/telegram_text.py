"""What the bot reads of a Telegram message: whether it is addressed to the bot, its
text without the bot's @mention (quoted blocks as "> " lines), where a forward came
from, and the new text of an edit."""

from __future__ import annotations

import re

from telegram import (
    Message,
    MessageEntity,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    User,
)

from gateway.adapters.telegram_media import media_of

_QUOTES = (MessageEntity.BLOCKQUOTE, MessageEntity.EXPANDABLE_BLOCKQUOTE)


def addressed(message: Message, me: User, trigger: str) -> bool:
    """Whether the bot should read this message: always in private chats, in groups
    when mentioned, replied to or given a command (or always, with trigger ``all``)."""
    if message.chat.type == "private" or trigger == "all":
        return True
    reply = message.reply_to_message
    if reply is not None and reply.from_user is not None and reply.from_user.id == me.id:
        return True
    name = f"@{me.username}".lower()
    for entity, text in _entities(message).items():
        if entity.type == MessageEntity.MENTION and text.lower() == name:
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == me.id:
            return True
        if entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
            _, _, target = text.partition("@")
            return not target or f"@{target}".lower() == name
    return False


def forwarded_from(message: Message) -> str | None:
    """Where a forwarded message came from, as Telegram gives it: the person's full name,
    a hidden person's name, the chat's or channel's title ("" when it gives none); None
    when the message is no forward."""
    origin = message.forward_origin
    if origin is None:
        return None
    if isinstance(origin, MessageOriginUser):
        return origin.sender_user.full_name
    if isinstance(origin, MessageOriginHiddenUser):
        return origin.sender_user_name
    if isinstance(origin, MessageOriginChat):
        return origin.sender_chat.title or ""
    if isinstance(origin, MessageOriginChannel):
        return origin.chat.title or ""
    return ""


def edited_text(message: Message, me: User) -> str | None:
    """An edited message's new text, read as its first version was (the text or caption
    without the bot's mention; "" for a picture or recording whose caption was removed);
    None when the edit changed no text (a live location moving, say)."""
    media = bool(media_of(message))
    if message.text is None and message.caption is None:
        return "" if media else None
    return without_mention(message, me, bare=media)


def without_mention(message: Message, me: User, bare: bool = False) -> str:
    """The text or caption with the bot's @mentions cut out and each quoted block (a
    blockquote entity) written as "> " lines, the way Markdown and Discord quote, so the
    quote is not taken for the person's own words (offsets are UTF-16). A text that is
    nothing but the mention stays as it is, unless `bare` (a caption: then "")."""
    text = message.text if message.text is not None else message.caption or ""
    name = f"@{me.username}".lower()
    entities = _entities(message)
    quotes = [(e.offset, e.offset + e.length) for e in entities if e.type in _QUOTES]
    cuts = [
        (e.offset, e.offset + e.length)
        for e, value in entities.items()
        if e.type == MessageEntity.MENTION
        and value.lower() == name
        and not any(q0 <= e.offset < q1 for q0, q1 in quotes)  # quoted: kept as written
    ]
    if not cuts and not quotes:
        return text
    units = text.encode("utf-16-le", "surrogatepass")
    edits = [(a, b, False) for a, b in cuts] + [(a, b, True) for a, b in quotes]
    for start, end, quote in sorted(edits, reverse=True):
        part = b""
        if quote:
            block = units[start * 2 : end * 2].decode("utf-16-le", "surrogatepass")
            part = "\n".join(f"> {line}" for line in block.split("\n")).encode(
                "utf-16-le", "surrogatepass"
            )
        units = units[: start * 2] + part + units[end * 2 :]
    stripped = re.sub(" {2,}", " ", units.decode("utf-16-le", "surrogatepass")).strip()
    return stripped if stripped or bare else text


def _entities(message: Message) -> dict[MessageEntity, str]:
    if message.text is not None:
        return message.parse_entities()
    return message.parse_caption_entities()

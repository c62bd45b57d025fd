"""A staged entry is shown whole and as written before Approve (issue 34, item 6).

The whole service serves Telegram and Discord through the real python-telegram-bot and
discord.py against the fakes (`test_approval_e2e.served`), with
``memory.write_approval: background``. The review proposes a 300-character entry full
of Markdown (``2*3*4``, ``__init__.py``, ``_underscores_``, a link): the notice that
reaches each fake server holds all of it, as the platform will show it (Telegram's text
after its entities, no formatting over the entry; Discord's content as Discord reads
it), in the message that carries the Approve button; Approve stores it unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.base import wait_until
from tests.fakes.telegram import ChatMessage
from tests.gateway.delivery.test_literal import discord_reads
from tests.gateway.test_approval_e2e import (
    ALICE,
    dc_buttons,
    found,
    review_writes,
    served,
    tg_buttons,
    tg_text,
)

ENTRY = (
    "Keeps notes in __init__.py and computes 2*3*4 before breakfast; calls them "
    "_underscores_ and links [x](http://y) from them. "
)
ENTRY = (ENTRY * 3)[:299] + "."
FORMATTING = {"bold", "italic", "underline", "strikethrough", "spoiler", "code", "pre"}


def utf16_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-16-le")) // 2


def tg_shows_whole(message: ChatMessage) -> bool:
    """Whether `message` shows `ENTRY` as written: all of it, no formatting over it."""
    text = message.text or ""
    at = text.find(ENTRY)
    if at < 0:
        return False
    start, end = utf16_offset(text, at), utf16_offset(text, at + len(ENTRY))
    return not [
        e
        for e in message.entities or []
        if e["type"] in FORMATTING and e["offset"] < end and e["offset"] + e["length"] > start
    ]


def dc_entry_message(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((m for m in messages if ENTRY in (discord_reads(m["content"]) or "")), None)


async def test_telegram_shows_a_300_character_entry_whole_before_approve(tmp_path: Path) -> None:
    async with served(tmp_path, "background", discord=False) as w:
        review_writes(w.model, "Noted.", ENTRY)
        w.tg.inject_text(ALICE, ALICE, "I keep notes in __init__.py and compute 2*3*4 daily")
        notice = await found(
            lambda: next((m for m in w.tg.chat_messages(ALICE) if m.reply_markup), None)
        )
        mine = [m for m in w.tg.chat_messages(ALICE) if m.from_bot]
        shown = [m for m in mine if tg_shows_whole(m)]
        assert shown, [m.text for m in mine]
        assert shown[0].message_id <= notice.message_id  # the entry comes before the button
        assert w.entries("telegram-111") == ()  # staged, not written

        seen = len(w.tg.chat_messages(ALICE))
        w.tg.inject_callback_query(ALICE, ALICE, tg_buttons(notice)["Approve"], notice.message_id)
        saved = await tg_text(w.tg, ALICE, "Saved:", seen)
        assert ENTRY in saved
        assert w.entries("telegram-111") == (ENTRY,)


async def test_discord_shows_a_300_character_entry_whole_before_approve(tmp_path: Path) -> None:
    async with served(tmp_path, "background") as w:
        review_writes(w.model, "Noted.", ENTRY)
        await w.dc.inject_message("I keep notes in __init__.py", ALICE, guild=False)
        dm = w.dc.dm_channel_id(ALICE)
        notice = await found(
            lambda: next((m for m in w.dc.channel_messages(dm) if m.get("components")), None)
        )
        shown = dc_entry_message(w.dc.channel_messages(dm))
        assert shown is not None, [m["content"] for m in w.dc.channel_messages(dm)]
        assert int(shown["id"]) <= int(notice["id"])  # the entry comes before the button
        assert w.entries("discord-111") == ()

        click = await w.dc.inject_button_click(notice, dc_buttons(notice)["Approve"], ALICE)
        await wait_until(lambda: any("Saved:" in t for t in click.texts), 10)
        saved = next(t for t in click.texts if "Saved:" in t)
        assert ENTRY in (discord_reads(saved) or "")
        assert w.entries("discord-111") == (ENTRY,)

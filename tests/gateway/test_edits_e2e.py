"""Edits and deletions withdraw support (issue 34, item 3), end to end: the whole service
serves Telegram and Discord through the real python-telegram-bot and discord.py against
the fakes. A person's edit is never a new message (no reply, no model call); the stored
message becomes the new text (a deleted one, empty), and an entry that only the old
text grounded is withdrawn."""

from __future__ import annotations

from pathlib import Path

from memory_core import FileMemoryStore
from tests.fakes.base import wait_until
from tests.fakes.openai import ToolCall
from tests.gateway.test_approval_e2e import found
from tests.gateway.test_forward_e2e import ALICE, DISCORD_ALICE, World, served

LISBON = ToolCall("memory", {"target": "user", "action": "add", "content": "Lives in Lisbon"})


def _entries(w: World, user_key: str) -> tuple[str, ...]:
    return FileMemoryStore(w.home).read("user", user_key).entries


async def _settled(w: World, user_key: str, texts: list[str]) -> None:
    """Wait until the person's stored messages read `texts` (the edit was applied)."""
    await wait_until(lambda: [c for c, _ in w.stored(user_key)] == texts, 10)


async def test_a_telegram_edit_replaces_the_text_and_withdraws_what_it_grounded(
    tmp_path: Path,
) -> None:
    key = f"telegram-{ALICE}"
    async with served(tmp_path) as w:
        w.model.call_tools(LISBON)
        w.model.say("Saved: you live in Lisbon.")
        sent = w.tg.inject_text(ALICE, ALICE, "I live in Lisbon")
        await found(lambda: w.tg.chat_texts(ALICE) or None)
        await wait_until(lambda: _entries(w, key) == ("Lives in Lisbon",), 10)
        asked = len(w.model.requests)
        w.tg.inject_edited_text(ALICE, ALICE, sent["message"]["message_id"], "I live in Porto")
        await _settled(w, key, ["I live in Porto"])
        await wait_until(lambda: _entries(w, key) == (), 10)
        await w.tg.wait_until(lambda: not w.tg.pending_updates)  # the edit was confirmed
        w.model.say("Porto it is.")
        w.tg.inject_text(ALICE, ALICE, "thanks")
        await found(lambda: "Porto it is." in w.tg.chat_texts(ALICE) or None)
    assert w.tg.chat_texts(ALICE) == ["Saved: you live in Lisbon.", "Porto it is."]
    assert len(w.model.requests) == asked + 1  # the edit asked the model nothing
    assert "I live in Porto" in w.user_contents()[-1]  # the next turn reads the new text


async def test_a_discord_edit_and_deletion_replace_the_stored_text(tmp_path: Path) -> None:
    key = f"discord-{DISCORD_ALICE}"
    async with served(tmp_path) as w:
        w.model.say("Noted.")
        w.model.say("Noted again.")
        first = await w.dc.inject_message("I have a dog", DISCORD_ALICE, guild=False)
        dm = w.dc.dm_channel_id(DISCORD_ALICE)
        await w.dc.wait_until(lambda: "Noted." in w.dc.channel_texts(dm))
        second = await w.dc.inject_message("called Biscuit", DISCORD_ALICE, guild=False)
        await w.dc.wait_until(lambda: "Noted again." in w.dc.channel_texts(dm))
        asked = len(w.model.requests)
        await w.dc.inject_edit(dm, int(first["id"]), "I have a cat")
        await _settled(w, key, ["I have a cat", "called Biscuit"])
        await w.dc.inject_delete(dm, int(second["id"]))
        await _settled(w, key, ["I have a cat", ""])
        w.model.say("Good.")
        await w.dc.inject_message("that is all", DISCORD_ALICE, guild=False)
        await w.dc.wait_until(lambda: "Good." in w.dc.channel_texts(dm))
    assert len(w.model.requests) == asked + 1  # the edit and the deletion asked nothing
    bot_texts = [m["content"] for m in w.dc.channel_messages(dm) if m["author"].get("bot")]
    assert bot_texts == ["Noted.", "Noted again.", "Good."]
    assert "I have a cat" in w.user_contents()[-1]
    assert "called Biscuit" not in w.user_contents()[-1]

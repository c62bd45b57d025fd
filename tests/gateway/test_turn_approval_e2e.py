"""A change staged in the person's own turn reaches them as the background's do (issue 23).

The whole service (`Service`, as `mnemo run` builds it) serves Telegram through the real
python-telegram-bot against the fake, the fake model scripting each turn. When the
turn's memory tool stages a change (an entry with a link, or every change under
``memory.write_approval: all``), the person gets, after the reply, the one short
message with Approve and Reject buttons in their private chat. Bob's press of Alice's
button changes nothing. In a group the reply carries no notice and no buttons: the
notice goes to the person's private chat if the bot knows it, else the change is only
listed by ``/memory pending``. No review runs here (its nudges are off): every model
reply is the turn's.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from memory_core import PendingChanges
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, ToolCall
from tests.gateway.test_approval_e2e import (
    ALICE,
    BOB,
    GROUP,
    MENTION,
    WAITING,
    World,
    alice_says_hello,
    found,
    tg_buttons,
    tg_notice,
    tg_text,
    tg_texts,
)
from tests.gateway.test_approval_e2e import served as serving

BLOG = "Blog at https://alice.example/blog"


def served(tmp_path: Path, approval: str) -> contextlib.AbstractAsyncContextManager[World]:
    """The service on Telegram alone, with no review (its nudges are off)."""
    return serving(tmp_path, approval, nudge_interval=0, discord=False)


def turn_writes(model: FakeOpenAI, content: str, reply: str) -> None:
    """The next turn: one memory add through the tool, then the reply."""
    model.call_tools(ToolCall("memory", {"target": "user", "action": "add", "content": content}))
    model.say(reply)


async def test_a_link_staged_in_alices_own_turn_is_announced_after_the_reply_with_buttons(
    tmp_path: Path,
) -> None:
    async with served(tmp_path, "off") as w:
        turn_writes(w.model, BLOG, "Noted, once you say yes.")
        w.tg.inject_text(ALICE, ALICE, "remember my blog: https://alice.example/blog")

        notice = await found(lambda: tg_notice(w.tg, ALICE))
        texts = tg_texts(w.tg, ALICE)
        assert texts.index("Noted, once you say yes.") < texts.index(notice.text or "")
        assert sum(WAITING in t for t in texts) == 1  # one message for the batch
        assert BLOG in (notice.text or "")
        assert "(you; it contains a link — you said: " in (notice.text or "")
        buttons = tg_buttons(notice)
        assert list(buttons) == ["Approve", "Reject"]
        assert w.entries("telegram-111") == ()  # staged, not written

        seen = len(w.tg.chat_messages(ALICE))
        w.tg.inject_callback_query(ALICE, BOB, buttons["Approve"], notice.message_id)
        refusal = await tg_text(w.tg, ALICE, "someone else", seen)
        assert "Nothing was changed" in refusal
        assert w.entries("telegram-111") == () and w.entries("telegram-222") == ()
        assert [c.content for c in PendingChanges(w.memory).list("telegram-111")] == [BLOG]
        assert tg_texts(w.tg, BOB) == []  # Bob never sees her notice

        seen = len(w.tg.chat_messages(ALICE))
        w.tg.inject_callback_query(ALICE, ALICE, buttons["Approve"], notice.message_id)
        saved = await tg_text(w.tg, ALICE, "Saved:", seen)
        assert BLOG in saved
        assert w.entries("telegram-111") == (BLOG,)
        assert [o.origin.kind for o in w.memory.origins("user", "telegram-111")] == ["person"]

        # The next turn stages nothing: no second notice.
        w.model.say("Hi again.")
        w.tg.inject_text(ALICE, ALICE, "hi")
        await found(lambda: next((t for t in tg_texts(w.tg, ALICE) if t == "Hi again."), None))
        assert sum(WAITING in t for t in tg_texts(w.tg, ALICE)) == 1


async def test_in_a_group_the_notice_goes_to_the_private_chat_or_only_to_memory_pending(
    tmp_path: Path,
) -> None:
    async with served(tmp_path, "all") as w:
        await alice_says_hello(w)

        turn_writes(w.model, "Keeps bees on the roof", "Bees, lovely.")
        w.tg.inject_text(GROUP, ALICE, "@mnemo_bot I keep bees on the roof", entities=[MENTION])
        notice = await found(lambda: tg_notice(w.tg, ALICE))
        assert "Keeps bees on the roof" in (notice.text or "")
        assert "every memory change waits for your approval" in (notice.text or "")
        assert list(tg_buttons(notice)) == ["Approve", "Reject"]

        # Bob has no private chat with the bot: his staged change is announced nowhere.
        turn_writes(w.model, "Plays jazz trumpet", "Jazz, nice.")
        w.tg.inject_text(GROUP, BOB, "@mnemo_bot I play jazz trumpet", entities=[MENTION])
        await found(lambda: next((t for t in tg_texts(w.tg, GROUP) if t == "Jazz, nice."), None))
        await wait_until(lambda: bool(PendingChanges(w.memory).list("telegram-222")), 10)
        assert tg_texts(w.tg, GROUP) == ["Bees, lovely.", "Jazz, nice."]  # no notice there
        assert all(m.reply_markup is None for m in w.tg.chat_messages(GROUP))
        assert all("jazz" not in t for t in tg_texts(w.tg, ALICE))
        assert w.entries("telegram-111") == () and w.entries("telegram-222") == ()

        w.tg.inject_command(BOB, BOB, "/memory pending")
        listing = await found(lambda: next(iter(tg_texts(w.tg, BOB)), None))
        assert "Plays jazz trumpet" in listing and "bees" not in listing
        assert tg_texts(w.tg, BOB) == [listing]  # and no notice before it

"""Background learning takes only the person's own words: not the assistant's replies,
not another person's messages, not a forwarded message (Telegram, through the fake)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.config import TelegramConfig
from gateway.jobs.extraction import EXTRACTION_SYSTEM, extract_session
from gateway.jobs.grounding import NOT_SAID_CODE
from gateway.messages import FORWARD_MARK
from memory_core import recall_scope
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, ToolCall
from tests.fakes.telegram import FakeTelegram
from tests.gateway.jobs.conftest import Bot, bot_config, message, running_bot, wait_for
from tests.gateway.sinks import ListSink

PEANUTS = ToolCall("memory", {"target": "user", "action": "add", "content": "Allergic to peanuts"})
VEGETARIAN = ToolCall("memory", {"target": "user", "action": "add", "content": "Is vegetarian"})
GROUP = "-100"
TOKEN = "123:ABC"
ALICE = 111


def tool_results(fake: FakeOpenAI) -> list[dict[str, Any]]:
    """Every tool result the model was shown, parsed, in order: the tool messages that
    end a request (those of the call the model just made)."""
    results: list[dict[str, Any]] = []
    for request in fake.requests:
        trailing: list[dict[str, Any]] = []
        for m in (request.body or {}).get("messages", []):
            trailing = [*trailing, m] if m.get("role") == "tool" else []
        results += [json.loads(m["content"]) for m in trailing]
    return results


async def reviewed(bot: Bot, user: str, group: str | None = None) -> bool:
    """Whether the review after `user`'s last turn has ended (its counters back at 0)."""
    session = await bot.services.sessions.current_session(message("", user, group).session_key())
    counters = await bot.services.sessions.get_counters(session.id)
    return counters is not None and counters.turns_since_memory == 0


def stored(home: Path, user_key: str) -> list[tuple[str, str, int]]:
    """(role, content, own_words) of every message of `user_key`'s chat sessions."""
    with sqlite3.connect(home / "state.db") as conn:
        return conn.execute(
            "SELECT m.role, m.content, m.own_words FROM messages m "
            "JOIN sessions s ON s.id = m.session_id "
            "WHERE s.user_key = ? AND s.source NOT IN ('review', 'extraction') ORDER BY m.id",
            (user_key,),
        ).fetchall()


async def test_a_review_saves_what_the_person_said_never_what_the_assistant_or_another_said(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    """In one group, Bob says he is allergic to peanuts; the assistant tells Alice so; her
    review may not save it for her. Bob's review may, and Alice's own fact is saved."""
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1})
    async with running_bot(config) as bot:
        fake.say("Noted, Bob.")
        fake.call_tools(PEANUTS)  # Bob's review
        fake.say("Saved.")
        await bot.say("I'm allergic to peanuts", "bob", GROUP)
        await wait_until(lambda: len(bot.notes) == 1)

        fake.say("Since you're allergic to peanuts, try a stir-fry without them.")
        fake.call_tools(PEANUTS)  # Alice's review: only the assistant (and Bob) said it
        fake.say("Nothing the person said.")
        await bot.say("what should I cook tonight?", "alice", GROUP)
        await wait_for(lambda: reviewed(bot, "alice", GROUP))
        refused_entries = await bot.user_entries("alice")

        fake.say("Noted.")
        fake.call_tools(VEGETARIAN)
        fake.say("Saved.")
        await bot.say("I'm vegetarian, by the way", "alice", GROUP)
        await wait_until(lambda: len(bot.notes) == 2)

    assert refused_entries == ()
    assert await bot.user_entries("alice") == ("Is vegetarian",)
    assert await bot.user_entries("bob") == ("Allergic to peanuts",)
    bobs, alices_refused, alices = tool_results(fake)
    assert bobs["success"] is True and alices["success"] is True
    assert alices_refused["success"] is False and alices_refused["code"] == NOT_SAID_CODE
    assert "'peanuts'" in alices_refused["error"]
    # the chat hears of the two writes only, each told to its own person
    assert [(to.user_id, text) for to, text in bot.notes] == [
        ("bob", "💾 Memory updated"),
        ("alice", "💾 Memory updated"),
    ]


async def test_the_extraction_takes_nothing_from_a_forwarded_message(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 0})
    brother = ToolCall(
        "memory", {"target": "user", "action": "add", "content": "Has a brother named Tom"}
    )
    async with running_bot(config) as bot:
        fake.say("Hi!")
        fake.say("Who wrote that?")
        fake.say("Got it.")
        await bot.say("hi")
        forwarded = dataclasses.replace(
            message("I'm allergic to peanuts, can't come to dinner"), own_words=False
        )
        await bot.conversations.handle(forwarded, ListSink())
        await bot.say("my brother Tom did")
        session = await bot.session()
        fake.call_tools(PEANUTS, brother)
        fake.say("Saved what I could.")
        await extract_session(bot.background.context, session.id, ending=False)
        scope = recall_scope("telegram-alice", "alice", "private")
        messages = await bot.services.sessions.get_messages(session.id, scope, lineage=False)

    assert await bot.user_entries() == ("Has a brother named Tom",)
    [peanuts, tom] = tool_results(fake)
    assert peanuts["code"] == NOT_SAID_CODE and tom["success"] is True
    [request, _] = [
        r.body for r in fake.requests if r.body["messages"][0].get("content") == EXTRACTION_SYSTEM
    ]
    transcript = request["messages"][1]["content"]
    assert "[user, not their own words] I'm allergic to peanuts" in transcript
    assert "[user] my brother Tom did" in transcript
    assert [m.own_words for m in messages if m.role == "user"] == [True, False, True]
    assert ("user", "I'm allergic to peanuts, can't come to dinner", 0) in stored(
        config.home, "telegram-alice"
    )


async def test_a_message_forwarded_on_telegram_is_not_the_persons_words(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    """Through the real python-telegram-bot and the fake Bot API: Alice forwards her
    friend's message; the review may not save its content as hers."""
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1})
    friend = {"id": 999, "is_bot": False, "first_name": "Dana"}
    origin = {"type": "user", "date": int(time.time()), "sender_user": friend}
    async with running_bot(config) as bot, FakeTelegram(token=TOKEN) as tg:
        telegram = TelegramConfig(
            token=TOKEN,
            base_url=tg.url + "/bot",
            base_file_url=tg.url + "/file/bot",
            allowed_users=("*",),
        )
        adapter = TelegramAdapter(telegram, poll_timeout=1, backoff=(0.01, 0.05))
        await adapter.start(bot.conversations, [])
        try:
            fake.say("Dana seems to avoid peanuts.")
            fake.call_tools(PEANUTS)  # the review, from the forwarded text only
            fake.say("Nothing to save.")
            tg.inject_text(ALICE, ALICE, "I'm allergic to peanuts", forward_origin=origin)
            await tg.wait_until(lambda: "Dana seems to avoid peanuts." in tg.chat_texts(ALICE))
            await wait_for(lambda: reviewed(bot, str(ALICE)))
            refused_entries = await bot.user_entries(str(ALICE))

            fake.say("Noted.")
            fake.call_tools(VEGETARIAN)
            fake.say("Saved.")
            tg.inject_text(ALICE, ALICE, "and I'm vegetarian myself")
            await wait_until(lambda: bool(bot.notes))
        finally:
            await adapter.close()

    assert tg.chat_texts(ALICE) == ["Dana seems to avoid peanuts.", "Noted."]
    assert refused_entries == ()
    assert await bot.user_entries(str(ALICE)) == ("Is vegetarian",)
    assert tool_results(fake)[0]["code"] == NOT_SAID_CODE
    assert stored(config.home, f"telegram-{ALICE}") == [
        ("user", f"{FORWARD_MARK.format(origin=', from Dana')}\nI'm allergic to peanuts", 0),
        ("assistant", "Dana seems to avoid peanuts.", 1),
        ("user", "and I'm vegetarian myself", 1),
        ("assistant", "Noted.", 1),
    ]

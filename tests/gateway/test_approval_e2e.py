"""Approval of background learning through the real adapters (issue 23, items 3 and 5).

The whole service (`Service`, as `mnemo run` builds it) serves Telegram and Discord in
this event loop, through the real python-telegram-bot and discord.py against the fakes,
with the fake model scripting each reply and each review. With
``memory.write_approval: background`` a review's write is staged, not written: the
person gets one message in their private chat with Approve and Reject buttons; Approve
writes the entry, Reject drops it. Bob never sees Alice's staged changes or buttons,
and pressing hers changes nothing. A group never sees a notice. An entry with a link
is staged with its reason even with approval off.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from gateway.adapters.discord_adapter import DiscordAdapter
from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.config import Config, DiscordConfig, TelegramConfig
from gateway.messages import Adapter
from gateway.service import Service
from memory_core import FileMemoryStore, PendingChanges
from tests.fakes.base import wait_until
from tests.fakes.discord import DEFAULT_TOKEN, FakeDiscord
from tests.fakes.openai import FakeOpenAI, ToolCall
from tests.fakes.telegram import ChatMessage, FakeTelegram
from tests.gateway.e2e_support import WAITING
from tests.gateway.serving import config_for
from tests.timing import scaled

TOKEN = "4242:approval-token"
ALICE, BOB = 111, 222
GROUP = -1001
MENTION = {"type": "mention", "offset": 0, "length": len("@mnemo_bot")}
T = TypeVar("T")


@dataclass
class World:
    tg: FakeTelegram
    dc: FakeDiscord
    model: FakeOpenAI
    memory: FileMemoryStore

    def entries(self, key: str) -> tuple[str, ...]:
        return self.memory.read("user", key).entries


def configured(
    base: Config, tg: FakeTelegram, dc: FakeDiscord, approval: str, nudge_interval: int = 1
) -> Config:
    telegram = TelegramConfig(
        token=TOKEN,
        base_url=tg.url + "/bot",
        base_file_url=tg.url + "/file/bot",
        edit_interval=0.05,
        allowed_users=("*",),
    )
    discord = DiscordConfig(
        token=DEFAULT_TOKEN,
        api_base=dc.api_base,
        gateway_url=dc.gateway_url,
        edit_interval=0.05,
        allowed_users=("*",),
    )
    memory = base.memory.model_copy(
        update={"nudge_interval": nudge_interval, "write_approval": approval}
    )
    skills = base.skills.model_copy(update={"creation_nudge_interval": 0})
    return base.model_copy(
        update={"telegram": telegram, "discord": discord, "memory": memory, "skills": skills}
    )


@contextlib.asynccontextmanager
async def served(
    tmp_path: Path, approval: str, nudge_interval: int = 1, discord: bool = True
) -> AsyncIterator[World]:
    """The service with `approval` as ``memory.write_approval``, a review after every
    `nudge_interval` replies (0: none), on Telegram, and on Discord unless told not to
    (the fake Discord serves either way)."""
    async with (
        FakeTelegram(token=TOKEN) as tg,
        FakeDiscord() as dc,
        FakeOpenAI(echo_when_idle=True) as model,
    ):
        base = config_for(model.url, tmp_path / "data")
        config = configured(base, tg, dc, approval, nudge_interval)
        adapters: list[Adapter] = [TelegramAdapter(config.telegram)]
        if discord:
            adapters.append(
                DiscordAdapter(config.discord, guild_ready_timeout=0.05, ready_timeout=scaled(5))
            )
        service = Service(config, adapters, signals=())
        running = asyncio.create_task(service.run())
        try:
            await wait_until(lambda: tg.calls_to("deleteWebhook") != [] or running.done(), 10)
            if discord:
                await dc.wait_ready(10)
            yield World(tg, dc, model, FileMemoryStore(config.home))
        finally:
            service.request_stop("test over")
            await asyncio.wait_for(running, scaled(30))


def review_writes(model: FakeOpenAI, reply: str, content: str) -> None:
    """The next reply, then the review after it: one memory add, then its closing text."""
    model.say(reply)
    model.call_tools(ToolCall("memory", {"target": "user", "action": "add", "content": content}))
    model.say("Saved.")


async def found(probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    result: list[T] = []

    def check() -> bool:
        value = probe()
        if value is not None:
            result.append(value)
        return value is not None

    await wait_until(check, timeout)
    return result[0]


def tg_notice(tg: FakeTelegram, chat: int, after: int = 0) -> ChatMessage | None:
    return next((m for m in tg.chat_messages(chat)[after:] if m.text and WAITING in m.text), None)


def tg_buttons(message: ChatMessage) -> dict[str, str]:
    assert message.reply_markup is not None
    rows = message.reply_markup["inline_keyboard"]
    return {button["text"]: button["callback_data"] for row in rows for button in row}


def tg_texts(tg: FakeTelegram, chat: int) -> list[str]:
    return [m.text or "" for m in tg.chat_messages(chat)]


async def tg_text(tg: FakeTelegram, chat: int, contains: str, after: int = 0) -> str:
    """The first text in `chat` past its first `after` messages holding `contains`
    (waits for it)."""
    return await found(lambda: next((t for t in tg_texts(tg, chat)[after:] if contains in t), None))


async def alice_says_hello(w: World, *review: str) -> None:
    """Alice talks to the bot in a private chat first: it can reach her there. `review`:
    what the review after that reply is answered, scripted before she writes (the review
    may start as soon as the reply is out)."""
    w.model.say("Hello Alice.")
    for text in review:
        w.model.say(text)
    w.tg.inject_text(ALICE, ALICE, "hello")
    await tg_text(w.tg, ALICE, "Hello")


async def test_telegram_a_staged_review_write_is_approved_by_button_and_bob_cannot(
    tmp_path: Path,
) -> None:
    async with served(tmp_path, "background") as w:
        review_writes(w.model, "Nice.", "Loves hiking in the Alps")
        w.tg.inject_text(ALICE, ALICE, "I love hiking in the Alps every summer")
        notice = await found(lambda: tg_notice(w.tg, ALICE))
        assert "Loves hiking in the Alps" in (notice.text or "")
        assert "learned in the background (review)" in (notice.text or "")
        buttons = tg_buttons(notice)
        assert list(buttons) == ["Approve", "Reject"]
        assert w.entries("telegram-111") == ()  # staged, not written
        assert all(WAITING not in t for t in tg_texts(w.tg, BOB))  # Bob sees nothing of it

        seen = len(w.tg.chat_messages(ALICE))
        w.tg.inject_callback_query(ALICE, BOB, buttons["Approve"], notice.message_id)
        refusal = await tg_text(w.tg, ALICE, "someone else", seen)
        assert "Nothing was changed" in refusal
        assert w.entries("telegram-111") == ()

        seen = len(w.tg.chat_messages(ALICE))
        w.tg.inject_callback_query(ALICE, ALICE, buttons["Approve"], notice.message_id)
        saved = await tg_text(w.tg, ALICE, "Saved:", seen)
        assert "Loves hiking in the Alps" in saved
        assert w.entries("telegram-111") == ("Loves hiking in the Alps",)
        assert w.entries("telegram-222") == ()


async def test_telegram_reject_drops_and_a_group_review_is_announced_only_in_private(
    tmp_path: Path,
) -> None:
    async with served(tmp_path, "background") as w:
        await alice_says_hello(w, "Saved nothing.")  # the review after it writes nothing
        await wait_until(lambda: len(w.model.requests) >= 2)
        seen = len(w.tg.chat_messages(ALICE))
        review_writes(w.model, "Sounds good.", "Keeps bees on the roof")
        w.tg.inject_text(GROUP, ALICE, "@mnemo_bot I keep bees on the roof", entities=[MENTION])
        notice = await found(lambda: tg_notice(w.tg, ALICE, seen))
        assert "Keeps bees on the roof" in (notice.text or "")
        assert tg_texts(w.tg, GROUP) == ["Sounds good."]  # the reply, and no notice
        assert all(m.reply_markup is None for m in w.tg.chat_messages(GROUP))

        after = len(w.tg.chat_messages(ALICE))
        w.tg.inject_callback_query(ALICE, ALICE, tg_buttons(notice)["Reject"], notice.message_id)
        dropped = await tg_text(w.tg, ALICE, "Dropped:", after)
        assert "Keeps bees on the roof" in dropped
        assert w.entries("telegram-111") == ()
        assert PendingChanges(w.memory).list("telegram-111") == ()


async def test_telegram_a_link_is_staged_with_its_reason_even_with_approval_off(
    tmp_path: Path,
) -> None:
    async with served(tmp_path, "off") as w:
        review_writes(w.model, "Cool blog.", "Blog at https://alice.example/blog")
        w.tg.inject_text(ALICE, ALICE, "my blog is at https://alice.example/blog")
        notice = await found(lambda: tg_notice(w.tg, ALICE))
        assert "link" in (notice.text or "")
        assert w.entries("telegram-111") == ()
        seen = len(w.tg.chat_messages(ALICE))
        w.tg.inject_command(ALICE, ALICE, "/memory pending")
        listing = await tg_text(w.tg, ALICE, "Waiting", seen)
        assert "alice.example" in listing and "link" in listing
        w.tg.inject_command(BOB, BOB, "/memory pending")  # Bob, in his own chat
        bob = await found(lambda: next(iter(tg_texts(w.tg, BOB)), None))
        assert "No memory changes are waiting" in bob


def dc_notice(dc: FakeDiscord, channel: int) -> dict[str, Any] | None:
    bot = str(dc.bot_id)
    return next(
        (
            m
            for m in dc.channel_messages(channel)
            if m["author"]["id"] == bot and WAITING in m["content"]
        ),
        None,
    )


def dc_buttons(message: dict[str, Any]) -> dict[str, str]:
    rows = message.get("components") or []
    return {b["label"]: b["custom_id"] for row in rows for b in row.get("components", [])}


async def test_discord_approve_and_reject_by_button_only_for_that_person(tmp_path: Path) -> None:
    async with served(tmp_path, "background") as w:
        review_writes(w.model, "Nice.", "Plays the cello")
        await w.dc.inject_message("I play the cello in an orchestra", ALICE, guild=False)
        dm = w.dc.dm_channel_id(ALICE)
        notice = await found(lambda: dc_notice(w.dc, dm))
        assert "Plays the cello" in notice["content"]
        buttons = dc_buttons(notice)
        assert list(buttons) == ["Approve", "Reject"]
        assert w.entries("discord-111") == ()

        bob_click = await w.dc.inject_button_click(notice, buttons["Approve"], BOB)
        await wait_until(lambda: any("someone else" in t for t in bob_click.texts), 10)
        assert w.entries("discord-111") == ()

        click = await w.dc.inject_button_click(notice, buttons["Approve"], ALICE)
        await wait_until(lambda: any("Saved:" in t for t in click.texts), 10)
        assert w.entries("discord-111") == ("Plays the cello",)

        review_writes(w.model, "Lovely.", "Has a grey cat named Ash")
        await w.dc.inject_message("I have a grey cat named Ash", ALICE, guild=False)
        second = await found(
            lambda: next(
                (
                    m
                    for m in w.dc.channel_messages(dm)
                    if WAITING in m["content"] and "Ash" in m["content"]
                ),
                None,
            )
        )
        click = await w.dc.inject_button_click(second, dc_buttons(second)["Reject"], ALICE)
        await wait_until(lambda: any("Dropped:" in t for t in click.texts), 10)
        assert w.entries("discord-111") == ("Plays the cello",)
        assert PendingChanges(w.memory).list("discord-111") == ()

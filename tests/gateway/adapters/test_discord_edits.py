"""Discord's message edits and deletions, and a forward's origin, through the real
discord.py and the fake Discord: MESSAGE_UPDATE, MESSAGE_DELETE and MESSAGE_DELETE_BULK
reach `Inbox.edited` as `MessageEdit`s, never as new messages."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from gateway.messages import InboundMessage, MessageEdit, ReplySink
from tests.fakes.base import wait_until
from tests.fakes.discord import BOT_ID, FakeDiscord
from tests.gateway.adapters.test_discord_adapter import (
    ALICE,
    BOB,
    CHANNEL,
    GUILD,
    OTHER_GUILD,
    Inbox,
    _texts,
    running,
)


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(guilds=(GUILD, OTHER_GUILD)) as fake:
        yield fake


async def _edits(dc: FakeDiscord, inbox: Inbox, count: int) -> list[MessageEdit]:
    """The inbox's edits once there are `count` (the fake is told of none: polled)."""
    await wait_until(lambda: len(inbox.edits) >= count)
    return inbox.edits


def _id(message: dict[str, object]) -> int:
    return int(str(message["id"]))


async def test_an_edited_dm_reaches_edited_and_is_never_a_new_message(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox):
        sent = await dc.inject_message("I live in Lisbon", ALICE, guild=False)
        dm = dc.dm_channel_id(ALICE)
        await _texts(dc, dm)
        await dc.inject_edit(dm, _id(sent), "I live in Porto")
        [edit] = await _edits(dc, inbox, 1)
        await dc.inject_message("next", ALICE, guild=False)
        assert await _texts(dc, dm, 2) == ["echo: I live in Lisbon", "echo: next"]
    assert edit == MessageEdit(
        platform="discord",
        chat_id=str(dm),
        chat_type="private",
        message_id=sent["id"],
        text="I live in Porto",
        user_id=str(ALICE),
        thread_id=None,
    )
    assert [m.text for m in inbox.messages] == ["I live in Lisbon", "next"]


async def test_only_a_persons_change_of_text_counts_as_an_edit(dc: FakeDiscord) -> None:
    """A pin or an embed loading (same text), and a bot's edit, are no edits; in a server
    the mention is cut as from the message, also when the edit drops it."""
    inbox = Inbox()
    async with running(dc, inbox):
        sent = await dc.inject_message("I keep bees", ALICE, mentions_bot=True)
        robot = await dc.inject_message("beep", 999, mentions_bot=True, bot=True)
        await _texts(dc, CHANNEL)
        await dc.inject_edit(CHANNEL, _id(sent))  # pinned: the text is the same
        await dc.inject_edit(CHANNEL, _id(robot), f"<@{BOT_ID}> boop")
        await dc.inject_edit(CHANNEL, _id(sent), f"<@{BOT_ID}> I keep wasps")
        await dc.inject_edit(CHANNEL, _id(sent), "I keep nothing")
        edits = await _edits(dc, inbox, 2)
        await dc.inject_message("sync", ALICE, mentions_bot=True)
        await _texts(dc, CHANNEL, 2)
    assert [(e.text, e.message_id, e.chat_id, e.chat_type) for e in edits] == [
        ("I keep wasps", sent["id"], str(CHANNEL), "group"),
        ("I keep nothing", sent["id"], str(CHANNEL), "group"),
    ]


async def test_an_edit_of_a_message_from_before_the_bot_connected_still_counts(
    dc: FakeDiscord,
) -> None:
    """Not in discord.py's cache: the edit counts when Discord marks the text edited."""
    inbox = Inbox()
    old = await dc.inject_message("I was away", ALICE, guild=False, dispatch=False)
    pinned = await dc.inject_message("pin me", ALICE, guild=False, dispatch=False)
    dm = dc.dm_channel_id(ALICE)
    async with running(dc, inbox):
        await dc.inject_edit(dm, _id(pinned))  # not edited: no edit
        await dc.inject_edit(dm, _id(old), "I was here")
        [edit] = await _edits(dc, inbox, 1)
    assert (edit.message_id, edit.text, edit.user_id) == (old["id"], "I was here", str(ALICE))
    assert inbox.messages == []


async def test_deletions_one_and_in_bulk_reach_edited_without_text(dc: FakeDiscord) -> None:
    inbox = Inbox()
    early = await dc.inject_message("before the bot", BOB, mentions_bot=True, dispatch=False)
    async with running(dc, inbox):
        first = await dc.inject_message("I have a dog", ALICE, mentions_bot=True)
        second = await dc.inject_message("called Biscuit", ALICE, mentions_bot=True)
        robot = await dc.inject_message("beep", 999, mentions_bot=True, bot=True)
        await _texts(dc, CHANNEL, 2)
        await dc.inject_delete(CHANNEL, _id(first))
        await dc.inject_delete(CHANNEL, _id(second), _id(robot), _id(early))
        deleted = list(await _edits(dc, inbox, 3))
        await dc.inject_message("sync", ALICE, mentions_bot=True)
        await _texts(dc, CHANNEL, 3)
    assert [(e.message_id, e.text, e.user_id) for e in deleted] == [
        (first["id"], None, str(ALICE)),
        (early["id"], None, None),  # not cached: who wrote it is not said
        (second["id"], None, str(ALICE)),
    ]
    assert all((e.chat_id, e.chat_type) == (str(CHANNEL), "group") for e in deleted)
    assert len(inbox.edits) == 3  # the bot's message was not passed on


async def test_in_a_thread_an_edit_names_the_thread_and_its_parent(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox):
        thread = await dc.create_thread("planning")
        sent = await dc.inject_message("meet at 5", ALICE, channel_id=thread, mentions_bot=True)
        await _texts(dc, thread)
        await dc.inject_edit(thread, _id(sent), f"<@{BOT_ID}> meet at 6")
        await dc.inject_delete(thread, _id(sent))
        edits = await _edits(dc, inbox, 2)
    assert [(e.text, e.chat_id, e.thread_id) for e in edits] == [
        ("meet at 6", str(CHANNEL), str(thread)),
        (None, str(CHANNEL), str(thread)),
    ]


async def test_servers_outside_allowed_guilds_send_no_edits(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox, allowed_guilds=(str(GUILD.id),)):
        other = OTHER_GUILD.channel_id
        elsewhere = await dc.inject_message("elsewhere", ALICE, channel_id=other)
        await dc.inject_edit(other, _id(elsewhere), "still elsewhere")
        await dc.inject_delete(other, _id(elsewhere))
        here = await dc.inject_message("here", ALICE, mentions_bot=True)
        await _texts(dc, CHANNEL)
        await dc.inject_edit(CHANNEL, _id(here), "here, edited")
        [edit] = await _edits(dc, inbox, 1)
    assert (edit.message_id, edit.text) == (here["id"], "here, edited")


async def test_an_edit_waits_until_its_message_is_stored(dc: FakeDiscord) -> None:
    order: list[str] = []

    class Slow(Inbox):
        async def handle(
            self,
            message: InboundMessage,
            sink: ReplySink,
            on_stored: Callable[[], None] | None = None,
        ) -> None:
            def stored() -> None:
                order.append(f"stored {message.text}")
                assert on_stored is not None
                on_stored()

            await super().handle(message, sink, stored)

        async def edited(self, edit: MessageEdit) -> None:
            order.append(f"edit {edit.text}")
            await super().edited(edit)

    inbox = Slow()
    inbox.stall = stall = asyncio.Event()
    async with running(dc, inbox):
        sent = await dc.inject_message("cats", ALICE, guild=False)
        await wait_until(lambda: bool(inbox.messages))
        await dc.inject_edit(dc.dm_channel_id(ALICE), _id(sent), "dogs")
        # discord.py reads events in order: once Bob's message is in, the edit was read
        await dc.inject_message("sync", BOB, guild=False)
        await wait_until(lambda: len(inbox.messages) == 2)
        stall.set()
        await _edits(dc, inbox, 1)
    assert [line for line in order if "sync" not in line] == ["stored cats", "edit dogs"]


async def test_a_forward_names_the_channel_it_came_from(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox):
        text = "remember that I live in Atlantis"
        await dc.inject_message("", ALICE, guild=False, forward_of=text,
                                forward_from_channel=CHANNEL)  # fmt: skip
        await dc.inject_message("", ALICE, guild=False, forward_of=text,
                                forward_from_channel=123)  # fmt: skip
        await _texts(dc, dc.dm_channel_id(ALICE), 2)
    assert [(m.text, m.own_words, m.forwarded_from) for m in inbox.messages] == [
        (text, False, "#general"),
        (text, False, "another channel"),
    ]

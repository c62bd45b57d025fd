"""The Discord adapter, with the real discord.py against the fake Discord (in process)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import discord.http
import pytest

from gateway.adapters.discord_adapter import (
    INTENT_LINE,
    DiscordAdapter,
    defuse_mentions,
    discord_units,
)
from gateway.config import DiscordConfig
from gateway.delivery import split_message
from gateway.messages import Choice, CommandArgument, CommandSpec, InboundMessage, ReplySink
from tests.fakes.discord import BOT_ID, DEFAULT_TOKEN, Call, FakeDiscord, FakeGuild
from tests.gateway.adapters.inboxes import Inbox as RecordingInbox
from tests.timing import scaled

ALICE = 4200000000000000001
BOB = 4200000000000000002
GUILD = FakeGuild(id=1200000000000000001, channel_id=1200000000000000002)
OTHER_GUILD = FakeGuild(id=1300000000000000001, channel_id=1300000000000000002, name="other")
CHANNEL = GUILD.channel_id
COMMANDS = [
    CommandSpec("help", "what the bot is"),
    CommandSpec(
        "recall", "recaps of past conversations", (CommandArgument("what", "a topic", True),)
    ),
]


class Inbox(RecordingInbox):
    """The recording inbox; Discord channels never migrate."""

    async def chat_migrated(self, platform: str, old_chat_id: str, new_chat_id: str) -> None:
        raise AssertionError("Discord channels do not migrate")


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(guilds=(GUILD, OTHER_GUILD)) as fake:
        yield fake


def _config(dc: FakeDiscord, **fields: Any) -> DiscordConfig:
    values: dict[str, Any] = {
        "token": DEFAULT_TOKEN,
        "api_base": dc.api_base,
        "gateway_url": dc.gateway_url,
        "edit_interval": 0.05,
        "allowed_users": ("*",),
    }
    return DiscordConfig(**(values | fields))


@asynccontextmanager
async def running(
    dc: FakeDiscord, inbox: Inbox, slash: bool = False, **fields: Any
) -> AsyncIterator[DiscordAdapter]:
    """A started adapter; with `slash`, its slash commands (help, recall) and buttons."""
    adapter = DiscordAdapter(
        _config(dc, **fields),
        guild_ready_timeout=0.05,
        ready_timeout=scaled(5),
        **({} if slash else {"commands_factory": None}),
    )
    await adapter.start(inbox, COMMANDS if slash else [])
    try:
        yield adapter
    finally:
        await adapter.close()


async def _texts(dc: FakeDiscord, channel_id: int, count: int = 1) -> list[str]:
    """The bot's messages in a channel, once there are `count` and none is being edited."""

    def bot_texts() -> list[str]:
        return [
            m["content"]
            for m in dc.channel_messages(channel_id)
            if m["author"]["id"] == str(BOT_ID)
        ]

    return await dc.wait_until(lambda: len(bot_texts()) >= count and bot_texts())


def _sends(dc: FakeDiscord, channel_id: int) -> list[Call]:
    return [c for c in dc.calls if c.route == f"POST /channels/{channel_id}/messages"]


async def test_a_dm_is_answered_streamed_as_one_message_then_edited(dc: FakeDiscord) -> None:
    first_shown = asyncio.Event()

    class Streaming(Inbox):
        async def handle(
            self, message: InboundMessage, sink: ReplySink, on_stored: Any = None
        ) -> None:
            self.messages.append(message)
            await sink.write("Hello")
            await first_shown.wait()
            await sink.write(", Alice.")
            await sink.finish()

    inbox = Streaming()
    async with running(dc, inbox):
        sent = await dc.inject_message("hi there", ALICE, guild=False, username="alice")
        dm = dc.dm_channel_id(ALICE)
        assert await _texts(dc, dm) == ["Hello"]
        first_shown.set()
        await dc.wait_for(f"PATCH /channels/{dm}/messages")
        assert await dc.wait_until(lambda: dc.channel_texts(dm)[-1] == "Hello, Alice.")
    [message] = inbox.messages
    assert message == InboundMessage(
        platform="discord",
        chat_id=str(dm),
        chat_type="private",
        user_id=str(ALICE),
        text="hi there",
        message_id=sent["id"],
        user_name="alice",
        thread_id=None,
        bot_username="mnemo",
        reply_to_id=None,
    )
    [send] = _sends(dc, dm)
    assert str(send.body["message_reference"]["message_id"]) == sent["id"]
    assert send.body["message_reference"]["fail_if_not_exists"] is False


async def test_in_a_server_only_a_mention_is_answered_and_the_mention_is_cut(
    dc: FakeDiscord,
) -> None:
    inbox = Inbox()
    async with running(dc, inbox):
        await dc.inject_message("talking among ourselves", ALICE)
        await dc.inject_message("@everyone look", ALICE)
        await dc.inject_message(f"what is  <@{BOT_ID}>  up?", BOB, mentions_bot=True)
        assert await _texts(dc, CHANNEL) == ["echo: what is up?"]
    [message] = inbox.messages
    assert (message.chat_type, message.chat_id, message.user_id) == (
        "group",
        str(CHANNEL),
        str(BOB),
    )
    assert message.thread_id is None


async def test_a_reply_to_the_bot_is_answered_without_a_mention(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox):
        asked = await dc.inject_message("first", ALICE, mentions_bot=True)
        await _texts(dc, CHANNEL)
        bot_message = dc.channel_messages(CHANNEL)[-1]
        await dc.inject_message("and then?", ALICE, reply_to=int(bot_message["id"]))
        assert await _texts(dc, CHANNEL, 2) == ["echo: first", "echo: and then?"]
    assert [m.reply_to_id for m in inbox.messages] == [None, bot_message["id"]]
    assert asked["id"] != bot_message["id"]


async def test_a_thread_is_its_own_session_and_followed_once_addressed(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox):
        thread = await dc.create_thread("planning")
        await dc.inject_message("unaddressed, not followed yet", ALICE, channel_id=thread)
        await dc.inject_message("help us", ALICE, channel_id=thread, mentions_bot=True)
        await _texts(dc, thread)
        await dc.inject_message("and a follow-up", BOB, channel_id=thread)
        assert await _texts(dc, thread, 2) == ["echo: help us", "echo: and a follow-up"]
        opened = await dc.create_thread("the bot's own", owner_id=BOT_ID)
        await dc.inject_message("in the bot's thread", ALICE, channel_id=opened)
        assert await _texts(dc, opened) == ["echo: in the bot's thread"]
    assert [(m.chat_id, m.thread_id, m.chat_type) for m in inbox.messages] == [
        (str(CHANNEL), str(thread), "group"),
        (str(CHANNEL), str(thread), "group"),
        (str(CHANNEL), str(opened), "group"),
    ]
    assert dc.channel_texts(CHANNEL) == []  # nothing leaked into the parent channel


async def test_messages_of_bots_and_of_itself_are_never_answered(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox):
        await dc.inject_message("I am a bot", 999, guild=False, bot=True)
        await dc.inject_message("beep", 999, mentions_bot=True, bot=True)
        await dc.inject_message(f"<@{BOT_ID}> myself", BOT_ID, mentions_bot=True, bot=True)
        await dc.inject_message("a person", ALICE, mentions_bot=True)
        await dc.wait_for(f"POST /channels/{CHANNEL}/messages")
    assert [m.text for m in inbox.messages] == ["a person"]
    assert [c.body["content"] for c in _sends(dc, CHANNEL)] == ["echo: a person"]
    assert dc.channel_texts(dc.dm_channel_id(999)) == ["I am a bot"]


async def test_attachments_alone_and_a_bare_mention_reach_the_inbox_without_text(
    dc: FakeDiscord,
) -> None:
    """The inbox answers both with one line after its access check (see
    tests/gateway/test_inbox.py); here: attachments that are neither sound nor picture are
    marked unsupported."""
    inbox = Inbox(lambda m: "cannot read" if m.unsupported else f"echo: {m.text or '?'}")
    async with running(dc, inbox):
        await dc.inject_message("", ALICE, guild=False, attachments=("notes.zip",))
        dm = dc.dm_channel_id(ALICE)
        assert await _texts(dc, dm) == ["cannot read"]
        await dc.inject_message("", BOB, mentions_bot=True)
        assert await _texts(dc, CHANNEL) == ["echo: ?"]
        await dc.inject_message("what is this?", ALICE, guild=False, attachments=("x.zip",))
        assert await _texts(dc, dm, 2) == ["cannot read", "echo: what is this?"]
    assert [(m.text, m.unsupported) for m in inbox.messages] == [
        ("", True),
        ("", False),
        ("what is this?", False),
    ]


async def test_servers_outside_allowed_guilds_are_ignored(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox, allowed_guilds=(str(OTHER_GUILD.id),)):
        await dc.inject_message("from the first server", ALICE, mentions_bot=True)
        await dc.inject_message("a DM", ALICE, guild=False)
        await dc.inject_message(
            "from the other", ALICE, channel_id=OTHER_GUILD.channel_id, mentions_bot=True
        )
        assert await _texts(dc, OTHER_GUILD.channel_id) == ["echo: from the other"]
        await _texts(dc, dc.dm_channel_id(ALICE))
    assert sorted(m.text for m in inbox.messages) == ["a DM", "from the other"]
    assert all(m["author"]["id"] != str(BOT_ID) for m in dc.channel_messages(CHANNEL))


async def test_a_long_reply_is_split_in_three_with_balanced_fences(dc: FakeDiscord) -> None:
    code = "\n".join(f"    line_{i:04d} = compute({i})" for i in range(158))
    reply = "Here is the script:\n\n```python\n" + code + "\n```\n\nThat is all."
    assert 4400 < len(reply) < 4700
    inbox = Inbox(lambda m: reply)
    async with running(dc, inbox):
        await dc.inject_message("write it", ALICE, guild=False)
        dm = dc.dm_channel_id(ALICE)
        texts = await _texts(dc, dm, 3)
        await asyncio.sleep(0)
    assert len(texts) == 3
    assert all(len(t) <= 2000 for t in texts)
    assert all(t.count("```") % 2 == 0 for t in texts)
    assert "line_0000" in texts[0] and "line_0157" in texts[-1]


async def test_mass_mentions_never_ping(dc: FakeDiscord) -> None:
    inbox = Inbox(lambda m: "Hey @everyone and @here, <@&77> and <@123>!")
    async with running(dc, inbox):
        await dc.inject_message("announce", ALICE, mentions_bot=True)
        [text] = await _texts(dc, CHANNEL)
    assert "@everyone" not in text and "@here" not in text
    assert text == "Hey @\u200beveryone and @\u200bhere, <@&77> and <@123>!"
    for call in _sends(dc, CHANNEL):
        mentions = call.body["allowed_mentions"]
        assert mentions["parse"] == [] and not mentions.get("replied_user")
        assert not mentions.get("users") and not mentions.get("roles")


async def test_buttons_carry_the_choice_payloads(dc: FakeDiscord) -> None:
    inbox = Inbox(lambda m: "Which one?")
    inbox.offer = (Choice("first entry", "choice:aaa"), Choice("second", "choice:bbb"))
    async with running(dc, inbox):
        await dc.inject_message("/forget x", ALICE, guild=False)
        dm = dc.dm_channel_id(ALICE)
        await _texts(dc, dm)
    [send] = _sends(dc, dm)
    buttons = [b for row in send.body["components"] for b in row["components"]]
    assert [(b["label"], b["custom_id"]) for b in buttons] == [
        ("first entry", "choice:aaa"),
        ("second", "choice:bbb"),
    ]


async def test_a_403_on_a_channel_does_not_crash_the_adapter(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox):
        dc.fail_next(f"POST /channels/{CHANNEL}/messages", 403, 50013, "Missing Permissions")
        await dc.inject_message("anyone?", ALICE, mentions_bot=True)
        await dc.wait_for(lambda c: c.status == 403)
        await dc.inject_message("still there?", BOB, guild=False)
        assert await _texts(dc, dc.dm_channel_id(BOB)) == ["echo: still there?"]
    assert [m.text for m in inbox.messages] == ["anyone?", "still there?"]


async def test_a_4000_character_message_is_handled(dc: FakeDiscord) -> None:
    inbox = Inbox(lambda m: f"got {len(m.text)}")
    async with running(dc, inbox):
        await dc.inject_message("x" * 4000, ALICE, guild=False)
        assert await _texts(dc, dc.dm_channel_id(ALICE)) == ["got 4000"]


async def test_a_refused_token_ends_the_adapter_with_one_line(
    dc: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    before = discord.http.Route.BASE
    adapter = DiscordAdapter(_config(dc, token="wrong"), guild_ready_timeout=0.05)
    with caplog.at_level(logging.ERROR, "gateway.adapters.discord_adapter"):
        await adapter.start(Inbox(), [])
    assert adapter.done.is_set()
    assert [r.getMessage() for r in caplog.records] == [
        "discord: the bot token was refused (check DISCORD_BOT_TOKEN)"
    ]
    assert before == discord.http.Route.BASE  # the endpoints were put back
    await adapter.close()


async def test_a_missing_message_content_intent_is_named_at_start(
    dc: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    dc.message_content_granted = False
    adapter = DiscordAdapter(_config(dc), guild_ready_timeout=0.05, commands_factory=None)
    with caplog.at_level(logging.ERROR, "gateway.adapters.discord_adapter"):
        await adapter.start(Inbox(), [])
    assert adapter.done.is_set()
    assert [r.getMessage() for r in caplog.records] == [INTENT_LINE]
    assert "Message Content Intent" in INTENT_LINE
    await adapter.close()


async def test_the_client_asks_only_for_the_intents_it_needs(dc: FakeDiscord) -> None:
    async with running(dc, Inbox()):
        assert dc.identify is not None
        intents = discord.Intents._from_value(dc.identify["intents"])
    on = {name for name, value in intents if value}
    assert on == {"guilds", "guild_messages", "dm_messages", "message_content"}


async def test_typing_shows_while_the_first_text_is_slow(dc: FakeDiscord) -> None:
    typed = asyncio.Event()

    class Slow(Inbox):
        async def handle(
            self, message: InboundMessage, sink: ReplySink, on_stored: Any = None
        ) -> None:
            await typed.wait()
            await sink.write("done thinking")
            await sink.finish()

    async with running(dc, Slow()):
        await dc.inject_message("think hard", ALICE, guild=False)
        dm = dc.dm_channel_id(ALICE)
        await dc.wait_for(f"POST /channels/{dm}/typing")  # after the 0.5 s typing delay
        typed.set()
        assert await _texts(dc, dm) == ["done thinking"]


async def test_a_short_429_is_waited_out_and_the_final_text_delivered(dc: FakeDiscord) -> None:
    inbox = Inbox(lambda m: "answer")
    async with running(dc, inbox):
        dc.rate_limit_next("POST /channels/", retry_after=0.05)
        await dc.inject_message("hello", ALICE, guild=False)
        dm = dc.dm_channel_id(ALICE)
        assert await _texts(dc, dm) == ["answer"]
    assert [c.status for c in _sends(dc, dm)] == [429, 200]


async def test_a_long_429_surfaces_as_rate_limited(
    dc: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = Inbox()
    async with running(dc, inbox) as adapter:
        await dc.inject_message("hello", ALICE, guild=False)
        dm = dc.dm_channel_id(ALICE)
        await _texts(dc, dm)
        dc.rate_limit_next(f"POST /channels/{dm}/messages", retry_after=60)
        with caplog.at_level(logging.WARNING, "gateway.adapters.discord_adapter"):
            await adapter.notify(inbox.messages[0], "memory updated")
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("gateway")]
    assert ours == ["discord: a notification was not delivered: Discord asks to wait 60 s"]


async def test_a_reconnect_mid_reply_loses_nothing(dc: FakeDiscord) -> None:
    reconnected = asyncio.Event()

    class Interrupted(Inbox):
        async def handle(
            self, message: InboundMessage, sink: ReplySink, on_stored: Any = None
        ) -> None:
            self.messages.append(message)
            await sink.write("part one")
            await reconnected.wait()
            await sink.write(", part two")
            await sink.finish()

    inbox = Interrupted()
    async with running(dc, inbox):
        await dc.inject_message("long story", ALICE, guild=False)
        dm = dc.dm_channel_id(ALICE)
        await _texts(dc, dm)
        await dc.send_reconnect()
        await dc.wait_ready()
        reconnected.set()
        assert await dc.wait_until(lambda: dc.channel_texts(dm)[-1] == "part one, part two")
        await dc.inject_message("still here?", ALICE, guild=False)
        await dc.wait_until(lambda: len(inbox.messages) == 2)
    assert any(p.get("op") == 6 for p in dc.gateway_received)  # resumed, not identified again


async def test_slash_commands_are_synced_from_the_menu_and_reach_the_inbox(
    dc: FakeDiscord,
) -> None:
    inbox = Inbox()
    async with running(dc, inbox, slash=True):
        assert dc.commands_synced() == ["help", "recall"]
        interaction = await dc.inject_command("recall", ALICE, {"what": "deploy"}, guild=False)
        await dc.wait_until(lambda: interaction.messages)
    assert [m.text for m in inbox.messages] == ["/recall deploy"]
    assert interaction.messages[0]["content"] == "echo: /recall deploy"


async def test_a_button_click_reaches_choose_as_the_clicker(dc: FakeDiscord) -> None:
    inbox = Inbox(lambda m: "Which one?")
    inbox.offer = (Choice("first entry", "choice:aaa"), Choice("second", "choice:bbb"))
    async with running(dc, inbox, slash=True):
        await dc.inject_message("forget x", ALICE, guild=False)
        dm = dc.dm_channel_id(ALICE)
        await _texts(dc, dm)
        [offered] = dc.channel_messages(dm)[-1:]
        click = await dc.inject_button_click(offered, "choice:bbb", ALICE)
        await dc.wait_until(lambda: click.messages and inbox.chosen)
    [(message, payload)] = inbox.chosen
    assert (payload, message.user_id, message.chat_id) == ("choice:bbb", str(ALICE), str(dm))


def test_split_parts_stay_within_2000_once_mass_mentions_are_defused() -> None:
    text = "@everyone " * 450 + "@here " * 200  # 5,700 characters, 650 mentions
    parts = split_message(text, 2000, discord_units)
    assert all(len(defuse_mentions(part)) <= 2000 for part in parts)
    assert "".join(parts).replace(" ", "") == text.replace(" ", "")
    assert defuse_mentions("@everyone @here @someone") == "@\u200beveryone @\u200bhere @someone"


async def test_after_stop_no_message_is_taken(dc: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(dc, inbox) as adapter:
        await dc.inject_message("before", ALICE, guild=False)
        await _texts(dc, dc.dm_channel_id(ALICE))
        await adapter.stop()
        await dc.inject_message("after", ALICE, guild=False)
        await dc.send_reconnect()  # the client reads the message before the RECONNECT
        await dc.wait_ready()
    assert [m.text for m in inbox.messages] == ["before"]
    assert dc.channel_texts(dc.dm_channel_id(ALICE)) == ["before", "echo: before", "after"]


async def test_an_export_file_arrives_as_an_attachment_after_the_text(
    dc: FakeDiscord, tmp_path: Path
) -> None:
    export = tmp_path / "discord-111-export.jsonl"
    export.write_bytes(b'{"kind": "memory"}\n')
    async with running(
        dc, Inbox(lambda m: "Everything I hold about you is in one file.", attach=export)
    ):
        await dc.inject_message("/export", ALICE, guild=False)
        dm = dc.dm_channel_id(ALICE)
        await dc.wait_until(lambda: any(c.files for c in _sends(dc, dm)))
    sends = _sends(dc, dm)
    assert sends[0].body["content"] == "Everything I hold about you is in one file."
    assert sends[-1].files == {"discord-111-export.jsonl": b'{"kind": "memory"}\n'}


async def test_a_malformed_event_fails_alone_and_the_connection_stays(
    dc: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = Inbox()
    async with running(dc, inbox) as adapter:
        bad = await dc.inject_message("no type", ALICE, mentions_bot=True, omit=("type",))
        again = await dc.inject_message("no author", BOB, mentions_bot=True, omit=("author",))
        await dc.inject_message("hello", ALICE, mentions_bot=True)
        assert await _texts(dc, CHANNEL) == ["echo: hello"]
        assert not adapter.done.is_set()
    assert [m.text for m in inbox.messages] == ["hello"]
    assert [p["op"] for p in dc.gateway_received if p.get("op") in (2, 6)] == [2]  # one session
    skipped = [r for r in caplog.records if "could not be read" in r.getMessage()]
    assert [r.getMessage() for r in skipped] == [
        f"discord: a MESSAGE_CREATE event (id {bad['id']}) could not be read and was skipped "
        "(KeyError)",
        f"discord: a MESSAGE_CREATE event (id {again['id']}) could not be read and was skipped "
        "(AttributeError)",
    ]
    assert [bool(r.exc_info) for r in skipped] == [True, False]  # one traceback per type


async def test_a_forwarded_message_is_read_and_marked_as_not_the_persons_words(
    dc: FakeDiscord,
) -> None:
    inbox = Inbox()
    async with running(dc, inbox):
        await dc.inject_message("", ALICE, guild=False, forward_of="I'm allergic to peanuts")
        await dc.inject_message("and I'm vegetarian", ALICE, guild=False)
        dm = dc.dm_channel_id(ALICE)
        shown = await _texts(dc, dm, count=2)
    assert [(m.text, m.own_words) for m in inbox.messages] == [
        ("I'm allergic to peanuts", False),
        ("and I'm vegetarian", True),
    ]
    assert shown == ["echo: I'm allergic to peanuts", "echo: and I'm vegetarian"]

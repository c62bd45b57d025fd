"""Slash commands and choice buttons: the real discord.py against the fake Discord.

`DiscordCommands` is built on a plain `discord.Client` (as the adapter builds it on
its own) with a recording inbox or the real `Conversations` (/forget with buttons).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import discord
import pytest

from gateway.adapters.discord_commands import DiscordCommands
from gateway.adapters.discord_endpoints import discord_endpoints
from gateway.app import Services, open_services
from gateway.config import DiscordConfig, load_config
from gateway.delivery.splitting import open_fence
from gateway.errors import ConfigError
from gateway.messages import (
    Choice,
    ChoiceSink,
    CommandArgument,
    CommandSpec,
    InboundMessage,
    Inbox,
    ReplySink,
)
from memory_core import Operation
from tests.fakes.discord import DEFAULT_GUILDS, DEFAULT_TOKEN, EPHEMERAL, LOADING, FakeDiscord
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import serving
from tests.timing import scaled

SKILLS = Path(__file__).resolve().parents[3] / "skills"
ADA, BOB = 4200000000000000001, 4200000000000000002
GUILD = DEFAULT_GUILDS[0]
COFFEE = ["Ada drinks oat milk coffee", "Ada's sister roasts coffee in Leeds"]
RECALL_WHAT = CommandArgument("what", "what to look for, optionally with a time", True)
FORGET_WHAT = CommandArgument("what", "a number from /memory, or words of the entry", True)
MENU = [  # some of the built-ins' specs, for the tests with a recording inbox
    CommandSpec("help", "what the bot keeps, and how to see and erase it"),
    CommandSpec("recall", "recaps of past conversations", (RECALL_WHAT,)),
    CommandSpec("status", "the model and the session"),
    CommandSpec("memory", "what the bot remembers about you"),
    CommandSpec("forget", "forget one remembered entry", (FORGET_WHAT,)),
]


class RecordingInbox:
    """Records what reaches it; answers with `reply(message)` and offers `choices`."""

    def __init__(
        self,
        reply: Callable[[InboundMessage], str] = lambda m: f"ok: {m.text}",
        choices: tuple[Choice, ...] = (),
    ) -> None:
        self.reply, self.choices = reply, choices
        self.handled: list[InboundMessage] = []
        self.chosen: list[tuple[InboundMessage, str]] = []

    async def handle(
        self, message: InboundMessage, sink: ReplySink, on_stored: Callable[[], None] | None = None
    ) -> None:
        self.handled.append(message)
        if self.choices and isinstance(sink, ChoiceSink):
            await sink.offer(self.choices)
        await sink.write(self.reply(message))
        await sink.finish()

    async def choose(self, message: InboundMessage, payload: str, sink: ReplySink) -> None:
        self.chosen.append((message, payload))
        await sink.write(f"picked {payload}")
        await sink.finish()

    async def chat_migrated(self, platform: str, old_chat_id: str, new_chat_id: str) -> None:
        raise AssertionError("not on Discord")


class Client(discord.Client):
    def __init__(self) -> None:
        super().__init__(
            intents=discord.Intents.default(),
            guild_ready_timeout=0.05,
            chunk_guilds_at_startup=False,
        )
        self.commands: DiscordCommands | None = None
        self.ready = asyncio.Event()

    async def on_ready(self) -> None:
        self.ready.set()

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        assert self.commands is not None
        await self.commands.on_interaction(interaction)


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        with discord_endpoints(fake.api_base, fake.gateway_url):
            yield fake


@asynccontextmanager
async def running(
    dc: FakeDiscord,
    inbox: Inbox,
    commands: Iterable[CommandSpec] = MENU,
    **config: Any,
) -> AsyncIterator[DiscordCommands]:
    """A client logged in to the fake with the commands built and synced."""
    client = Client()
    settings = DiscordConfig(edit_interval=0.05, allowed_users=("*",), **config)
    built = DiscordCommands(client, inbox, commands, settings)
    client.commands = built
    task = asyncio.create_task(client.start(DEFAULT_TOKEN))
    try:
        await asyncio.wait_for(client.ready.wait(), scaled(5))
        await built.sync()
        yield built
    finally:
        await client.close()
        await asyncio.gather(task, return_exceptions=True)


async def answered(dc: FakeDiscord, interaction: Any, count: int = 1) -> list[str]:
    """The texts the person sees once `count` messages answer the interaction, loading done."""

    def done() -> list[str] | None:
        shown = interaction.messages
        if len(shown) < count or any(m["flags"] & LOADING for m in shown):
            return None
        return list(interaction.texts)

    texts: list[str] = await dc.wait_until(done)
    return texts


def buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for row in message["components"] for b in row["components"]]


# ----- sync ------------------------------------------------------------------------------


async def test_commands_are_synced_globally_from_the_menu(dc: FakeDiscord) -> None:
    async with running(dc, RecordingInbox()):
        assert dc.commands_synced() == ["help", "recall", "status", "memory", "forget"]
        recall = next(c for c in dc.app_commands["global"] if c["name"] == "recall")
        assert recall["options"] == [
            {
                "type": 3,
                "name": "what",
                "description": "what to look for, optionally with a time",
                "required": True,
            }
        ]
        assert not [c for c in dc.calls if "/guilds/" in c.path]


async def test_commands_are_synced_to_each_of_guild_ids_only(dc: FakeDiscord) -> None:
    async with running(dc, RecordingInbox(), guild_ids=(str(GUILD.id),)):
        assert "help" in dc.commands_synced(GUILD.id)
        assert "global" not in dc.app_commands
        interaction = await dc.inject_command("help", ADA)
        assert await answered(dc, interaction) == ["ok: /help"]


async def test_a_guild_id_that_is_no_id_is_a_config_error() -> None:
    client = Client()
    with pytest.raises(ConfigError, match=r"discord.guild_ids: 'my-server' is not a server id"):
        DiscordCommands(client, RecordingInbox(), [], DiscordConfig(guild_ids=("my-server",)))
    await client.close()


async def test_long_names_and_descriptions_are_made_acceptable(dc: FakeDiscord) -> None:
    arguments = (CommandArgument("Text", "t" * 150, True), CommandArgument("when", " "))
    long = CommandSpec("Echo", "word " * 40, arguments)
    bad = CommandSpec("two words", "left out")
    async with running(dc, RecordingInbox(), [long, bad, CommandSpec("help", "the help")]):
        synced = dc.app_commands["global"]
        assert [c["name"] for c in synced] == ["echo", "help"]
        assert len(synced[0]["description"]) == 100 and synced[0]["description"].endswith("…")
        assert synced[0]["options"] == [
            {"type": 3, "name": "text", "description": "t" * 99 + "…", "required": True},
            {"type": 3, "name": "when", "description": "when", "required": False},
        ]
        assert synced[1]["description"] == "the help"


async def test_a_refused_sync_is_logged_and_commands_still_work(
    dc: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    dc.fail_next("PUT /applications/", 403, 50001, "Missing Access")
    async with running(dc, RecordingInbox()) as commands:
        assert "slash commands not synced globally" in caplog.text
        await commands.sync()  # a later sync goes through
        assert "help" in dc.commands_synced()


# ----- invocations -----------------------------------------------------------------------


async def test_help_is_deferred_then_the_deferred_response_is_edited(dc: FakeDiscord) -> None:
    inbox = RecordingInbox()
    async with running(dc, inbox):
        interaction = await dc.inject_command("help", ADA)
        assert await answered(dc, interaction) == ["ok: /help"]
    assert interaction.responses == [5]  # deferred ("thinking…"), within Discord's window
    assert interaction.answered_after is not None and interaction.answered_after < 3
    assert interaction.original is not None
    assert interaction.original["flags"] == EPHEMERAL  # in a server: only the person sees it
    assert dc.channel_texts(GUILD.channel_id) == []
    message = inbox.handled[0]
    assert (message.platform, message.chat_type, message.chat_id) == (
        "discord",
        "group",
        str(GUILD.channel_id),
    )
    assert (message.user_id, message.message_id) == (str(ADA), str(interaction.id))


async def test_the_defer_goes_before_the_inbox_answers(dc: FakeDiscord) -> None:
    release = asyncio.Event()

    class Slow(RecordingInbox):
        async def handle(
            self,
            message: InboundMessage,
            sink: ReplySink,
            on_stored: Callable[[], None] | None = None,
        ) -> None:
            await release.wait()  # a /recall whose recap takes longer than 3 s
            await super().handle(message, sink, on_stored)

    async with running(dc, Slow()):
        interaction = await dc.inject_command("recall", ADA, {"what": "deploy"})
        await dc.wait_for("/callback")
        assert interaction.responses == [5] and interaction.texts == [""]  # thinking…
        release.set()
        assert await answered(dc, interaction) == ["ok: /recall deploy"]


async def test_an_expired_interaction_is_logged_and_the_next_one_answered(
    dc: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = RecordingInbox()
    async with running(dc, inbox):
        dc.fail_next("/callback", 404, 10062, "Unknown interaction")
        await dc.inject_command("help", ADA)
        await dc.wait_for(lambda c: c.status == 404)
        interaction = await dc.inject_command("status", ADA)
        assert await answered(dc, interaction) == ["ok: /status"]
    assert "a slash command could not be answered" in caplog.text
    assert [m.text for m in inbox.handled] == ["/status"]


async def test_recall_reaches_the_inbox_with_its_option_as_text(dc: FakeDiscord) -> None:
    inbox = RecordingInbox()
    async with running(dc, inbox):
        interaction = await dc.inject_command("recall", ADA, {"what": " deploy last week "})
        assert await answered(dc, interaction) == ["ok: /recall deploy last week"]
    assert inbox.handled[0].text == "/recall deploy last week"


async def test_in_a_dm_the_reply_is_an_ordinary_message(dc: FakeDiscord) -> None:
    inbox = RecordingInbox()
    async with running(dc, inbox):
        interaction = await dc.inject_command("status", ADA, guild=False)
        assert await answered(dc, interaction) == ["ok: /status"]
    assert interaction.original is not None and interaction.original["flags"] == 0
    assert inbox.handled[0].chat_type == "private"
    assert dc.channel_texts(dc.dm_channel_id(ADA)) == ["ok: /status"]


async def test_a_long_reply_arrives_as_follow_ups_with_balanced_fences(dc: FakeDiscord) -> None:
    code = "\n".join(f"line {i:04} " + "x" * 40 for i in range(90))  # ~4,500 characters
    inbox = RecordingInbox(lambda m: f"Here:\n```python\n{code}\n```\ndone")
    async with running(dc, inbox):
        interaction = await dc.inject_command("help", ADA)
        texts = await answered(dc, interaction, count=3)
    assert len(texts) == 3 and all(len(t) <= 2000 for t in texts)
    assert all(open_fence(t) is None for t in texts)  # every part closes its fence
    assert texts[1].startswith("```python") and texts[2].startswith("```python")
    assert all(m["flags"] & EPHEMERAL for m in interaction.messages)
    followups = [c for c in dc.calls if c.route.startswith("POST /webhooks/")]
    assert len(followups) == 2
    assert all(c.body["allowed_mentions"] == {"parse": []} for c in followups)


async def test_mass_mentions_never_ping(dc: FakeDiscord) -> None:
    async with running(dc, RecordingInbox(lambda m: "hello @everyone and @here")):
        interaction = await dc.inject_command("help", ADA)
        assert await answered(dc, interaction) == ["hello @everyone and @here"]
    edit = next(c for c in dc.calls if c.route.endswith("/messages/@original"))
    assert edit.body["allowed_mentions"] == {"parse": []}


async def test_a_quiet_refusal_withdraws_the_thinking_response(dc: FakeDiscord) -> None:
    class Quiet(RecordingInbox):
        async def handle(
            self,
            message: InboundMessage,
            sink: ReplySink,
            on_stored: Callable[[], None] | None = None,
        ) -> None:
            self.handled.append(message)
            await sink.finish()

    async with running(dc, Quiet()):
        interaction = await dc.inject_command("help", ADA)
        await dc.wait_for("DELETE /webhooks/")
    assert interaction.messages == []


async def test_a_server_outside_allowed_guilds_gets_one_line(dc: FakeDiscord) -> None:
    inbox = RecordingInbox()
    async with running(dc, inbox, allowed_guilds=("999",)):
        interaction = await dc.inject_command("help", ADA)
        texts = await answered(dc, interaction)
    assert "does not serve this server" in texts[0] and str(GUILD.id) in texts[0]
    assert interaction.responses == [4] and interaction.messages[0]["flags"] == EPHEMERAL
    assert inbox.handled == []


async def test_the_refusal_is_in_the_language_of_the_persons_discord(dc: FakeDiscord) -> None:
    async with running(dc, RecordingInbox(), allowed_guilds=("999",)):
        chinese = await dc.inject_command("help", ADA, locale="zh-CN")
        french = await dc.inject_command("help", BOB, locale="fr")  # not shipped: English
        [refusal] = await answered(dc, chinese)
        [english] = await answered(dc, french)
    assert refusal.startswith("抱歉") and str(GUILD.id) in refusal
    assert "discord.allowed_guilds" in refusal and "Sorry" not in refusal
    assert english.startswith("Sorry, this bot does not serve this server")


async def test_the_interactions_locale_is_the_messages_language_hint(dc: FakeDiscord) -> None:
    inbox = RecordingInbox(choices=(Choice("好", "choice:zh"),))
    async with running(dc, inbox):
        command = await dc.inject_command("memory", ADA, locale="zh-CN")
        await answered(dc, command)
        click = await dc.inject_button_click(
            command.messages[-1], "choice:zh", ADA, locale="es-419"
        )
        await answered(dc, click, count=2)
    assert inbox.handled[0].language == "zh-CN"
    clicked, _ = inbox.chosen[0]
    assert clicked.language == "es-419"  # each interaction carries the locale of its time


async def test_a_command_in_a_thread_is_the_thread_of_its_channel(dc: FakeDiscord) -> None:
    inbox = RecordingInbox()
    async with running(dc, inbox):
        thread = await dc.create_thread("ideas")
        interaction = await dc.inject_command("memory", ADA, channel_id=thread)
        assert await answered(dc, interaction) == ["ok: /memory"]
    message = inbox.handled[0]
    assert (message.chat_id, message.thread_id) == (str(GUILD.channel_id), str(thread))


# ----- buttons ---------------------------------------------------------------------------


async def test_choices_become_buttons_and_a_click_routes_to_choose(dc: FakeDiscord) -> None:
    offered = (Choice("Oat milk", "choice:tok-1"), Choice("Roastery", "choice:tok-2"))
    inbox = RecordingInbox(choices=offered)
    async with running(dc, inbox):
        interaction = await dc.inject_command("forget", ADA, {"what": "coffee"})
        await answered(dc, interaction)
        shown = interaction.messages[-1]
        assert [(b["label"], b["custom_id"]) for b in buttons(shown)] == [
            ("Oat milk", "choice:tok-1"),
            ("Roastery", "choice:tok-2"),
        ]
        click = await dc.inject_button_click(shown, "choice:tok-2", ADA)
        texts = await answered(dc, click, count=2)  # the buttons' message, then the answer
    assert click.responses == [6]  # acknowledged without changing the message
    assert texts[-1] == "picked choice:tok-2"
    assert click.followups[0]["flags"] == EPHEMERAL
    message, payload = inbox.chosen[0]
    assert (message.user_id, message.chat_id, payload) == (
        str(ADA),
        str(GUILD.channel_id),
        "choice:tok-2",
    )


async def test_other_buttons_are_not_ours(dc: FakeDiscord) -> None:
    inbox = RecordingInbox()
    async with running(dc, inbox):
        bot_message = await _bot_message_with_button(dc, "vote:1")
        click = await dc.inject_button_click(bot_message, "vote:1", ADA)
        interaction = await dc.inject_command("help", ADA)  # handled after the click was
        await answered(dc, interaction)
    assert click.responses == [] and inbox.chosen == []


async def _bot_message_with_button(dc: FakeDiscord, custom_id: str) -> dict[str, Any]:
    button = {"type": 2, "style": 2, "label": "vote", "custom_id": custom_id}
    message = dc._new_message(GUILD.channel_id, dc.bot_user, "a poll", [])
    message["components"] = [{"type": 1, "components": [button]}]
    return message


# ----- /forget with buttons through the real Conversations -------------------------------


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    async with FakeOpenAI() as model:
        env = {
            "OPENAI_BASE_URL": model.url + "/v1",
            "MNEMO_HOME": str(tmp_path / "data"),
            "MNEMO_SKILLS_DIR": str(SKILLS),
        }
        async with open_services(load_config(None, environ=env)) as opened:
            operations = [Operation("add", content=entry) for entry in COFFEE]
            opened.memory.apply("user", f"discord-{ADA}", operations)
            yield opened
        assert model.requests == []  # commands never reach the model


def remembered(services: Services) -> list[str]:
    return list(services.memory.read("user", f"discord-{ADA}").entries)


async def test_the_built_in_menu_is_synced_without_the_admins_commands(
    dc: FakeDiscord, services: Services
) -> None:
    conversations = serving(services)
    menu = conversations.menu
    async with running(dc, conversations, menu):
        synced = dc.commands_synced()
        assert synced == [spec.name for spec in menu]
        assert {"help", "recall", "memory", "forget", "export"} <= set(synced)
        assert "promote" not in synced  # admin-only, as in Telegram's menu
        recall = next(c for c in dc.app_commands["global"] if c["name"] == "recall")
        [what] = recall["options"]
        localized = what.pop("description_localizations")
        assert what == {
            "type": 3,
            "name": "what",
            "description": "what to look for, optionally with a time",
            "required": True,
        }
        assert set(localized) == {"zh-CN", "zh-TW", "es-ES", "es-419"}  # from the catalogs
        assert set(recall["description_localizations"]) == set(localized)


async def test_forget_offers_buttons_only_the_person_can_press(
    dc: FakeDiscord, services: Services
) -> None:
    conversations = serving(services)
    async with running(dc, conversations, conversations.menu):
        # /forget works in a DM only (Conversations refuses it in servers)
        interaction = await dc.inject_command("forget", ADA, {"what": "coffee"}, guild=False)
        await answered(dc, interaction)
        shown = interaction.messages[-1]
        labels = [b["label"] for b in buttons(shown)]
        assert labels == COFFEE
        first = buttons(shown)[0]["custom_id"]

        # (Discord shows a DM to its two people only; the fake lets anyone click, which
        # stands for a public message with buttons)
        stranger = await dc.inject_button_click(shown, first, BOB)
        refused = await answered(dc, stranger, count=2)
        assert "offered to someone else" in refused[-1]
        assert remembered(services) == COFFEE

        owner = await dc.inject_button_click(shown, first, ADA)
        done = await answered(dc, owner, count=2)
        assert f"Forgotten: {COFFEE[0]}" in done[-1]
        assert remembered(services) == COFFEE[1:]


async def test_export_in_a_dm_follows_its_answer_with_the_file(
    dc: FakeDiscord, services: Services
) -> None:
    conversations = serving(services)
    async with running(dc, conversations, conversations.menu):
        interaction = await dc.inject_command("export", ADA, {}, guild=False)
        texts = await answered(dc, interaction, count=2)
        exports = services.config.home / "exports"
        await dc.wait_until(lambda: not list(exports.rglob("*.jsonl")))  # sent, so deleted
    assert "attached" in texts[0] and str(services.config.home) not in texts[0]  # no path
    ((name, content),) = interaction.followups[-1]["files"].items()
    assert name.endswith(".jsonl")
    assert content  # the person's data, as JSON Lines

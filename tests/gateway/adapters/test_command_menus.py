"""The command menu in every shipped language: from the catalogs, through the router's
`menu`, to Telegram's ``setMyCommands`` per ``language_code`` and Discord's
``description_localizations`` (the real python-telegram-bot and discord.py against
the fakes). The catalogs are a small one of the test's own, so that the assertions do
not depend on how the shipped ones word each command."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.access import AccessPolicy
from gateway.adapters.discord_commands import DiscordCommands
from gateway.adapters.discord_endpoints import discord_endpoints
from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.app import Services, build_conversations
from gateway.commands.choices import PendingChoices
from gateway.commands.registry import Command, CommandContext, CommandRegistry, CommandReply
from gateway.commands.router import CommandRouter
from gateway.config import DiscordConfig, TelegramConfig
from gateway.i18n import Catalogs
from gateway.messages import CommandArgument, CommandSpec, CommandText
from gateway.person_locale import PersonLocales
from tests.fakes.discord import DEFAULT_TOKEN, FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.gateway.adapters.inboxes import Inbox
from tests.gateway.adapters.test_discord_commands import Client
from tests.timing import scaled

HELP = "what the bot keeps, and how to see and erase it"
RECALL = "recaps of past conversations"
WHAT = "what to look for, optionally with a time"
TRANSLATED = {
    "zh": {HELP: "机器人保存了什么，以及如何查看和删除", RECALL: "回顾过去的对话",
           WHAT: "要找什么，可以带上时间"},
    "es": {HELP: "qué guarda el bot y cómo verlo y borrarlo", RECALL: "resúmenes de conversaciones",
           WHAT: "qué buscar, opcionalmente con un momento"},
}  # fmt: skip
TOKEN = "123:ABC"


def _po(language: str, texts: dict[str, str]) -> str:
    header = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
    header += f'"Language: {language}\\n"\n'
    entries = "".join(f'\nmsgid "{msgid}"\nmsgstr "{text}"\n' for msgid, text in texts.items())
    return header + entries


@pytest.fixture
def catalogs(tmp_path: Path) -> Catalogs:
    for language, texts in TRANSLATED.items():
        folder = tmp_path / "locales" / language / "LC_MESSAGES"
        folder.mkdir(parents=True)
        (folder / "mnemo.po").write_text(_po(language, texts), encoding="utf-8")
    return Catalogs(tmp_path / "locales")


async def _nothing(context: CommandContext) -> CommandReply:
    return CommandReply("")


def menu(catalogs: Catalogs, language: str = "en") -> list[CommandSpec]:
    registry = CommandRegistry()
    registry.register(Command("help", HELP, _nothing))
    registry.register(Command("recall", RECALL, _nothing, (CommandArgument("what", WHAT, True),)))
    registry.register(Command("promote", "admins only", _nothing, admin_only=True))
    locales = PersonLocales(catalogs, None, language=language)
    return CommandRouter(registry, PendingChoices(), lambda *_: False, locales).menu


def test_the_menu_holds_each_command_in_every_shipped_language(catalogs: Catalogs) -> None:
    help_, recall = menu(catalogs)  # no admin-only command
    assert (help_.name, help_.description) == ("help", HELP)
    assert recall.translations == {
        "en": CommandText(RECALL, (WHAT,)),
        "zh": CommandText("回顾过去的对话", ("要找什么，可以带上时间",)),
        "es": CommandText(
            "resúmenes de conversaciones", ("qué buscar, opcionalmente con un momento",)
        ),
    }
    assert recall.text("zh").description == "回顾过去的对话"


def test_the_menus_own_text_is_in_the_configs_language(catalogs: Catalogs) -> None:
    _, recall = menu(catalogs, "zh")
    assert recall.description == "回顾过去的对话"
    assert [a.description for a in recall.arguments] == ["要找什么，可以带上时间"]
    assert recall.translations["en"] == CommandText(RECALL, (WHAT,))  # English still there
    assert recall.name == "recall" and recall.arguments[0].name == "what"


def test_without_catalogs_the_menu_is_the_commands_own_text() -> None:
    registry = CommandRegistry()
    registry.register(Command("help", HELP, _nothing))
    [spec] = CommandRouter(registry, PendingChoices(), lambda *_: False).menu
    assert spec == CommandSpec("help", HELP)
    assert spec.text("zh") == CommandText(HELP)


# ----- Telegram --------------------------------------------------------------------------


async def test_telegram_gets_the_menu_once_per_language_and_a_default(
    catalogs: Catalogs,
) -> None:
    async with FakeTelegram(token=TOKEN) as tg:
        values = {
            "token": TOKEN,
            "base_url": tg.url + "/bot",
            "base_file_url": tg.url + "/file/bot",
        }
        adapter = TelegramAdapter(TelegramConfig(**values), poll_timeout=1, backoff=(0.01, 0.05))
        await adapter.start(Inbox(), menu(catalogs, "es"))
        await adapter.close()
    languages = sorted(c.params.get("language_code", "") for c in tg.calls_to("setMyCommands"))
    assert languages == ["", "en", "es", "zh"]  # once each
    assert tg.commands(language_code="zh") == [
        {"command": "help", "description": "机器人保存了什么，以及如何查看和删除"},
        {"command": "recall", "description": "回顾过去的对话"},
    ]
    assert tg.commands(language_code="en")[1] == {"command": "recall", "description": RECALL}
    # the default menu (no language_code): the config's language, here Spanish
    assert tg.commands()[1] == {"command": "recall", "description": "resúmenes de conversaciones"}


# ----- Discord ---------------------------------------------------------------------------


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        with discord_endpoints(fake.api_base, fake.gateway_url):
            yield fake


async def synced(dc: FakeDiscord, commands: list[CommandSpec]) -> list[dict[str, Any]]:
    """The command payloads Discord got from one global sync of `commands`."""
    client = Client()
    settings = DiscordConfig(edit_interval=0.05, allowed_users=("*",))
    client.commands = DiscordCommands(client, Inbox(), commands, settings)
    task = asyncio.create_task(client.start(DEFAULT_TOKEN))
    try:
        await asyncio.wait_for(client.ready.wait(), scaled(5))
        await client.commands.sync()
    finally:
        await client.close()
        await asyncio.gather(task, return_exceptions=True)
    return dc.app_commands["global"]


async def test_discord_commands_carry_their_descriptions_per_locale(
    dc: FakeDiscord, catalogs: Catalogs
) -> None:
    help_, recall = await synced(dc, menu(catalogs))
    assert help_["description"] == HELP
    assert help_["description_localizations"] == {
        "zh-CN": "机器人保存了什么，以及如何查看和删除",
        "zh-TW": "机器人保存了什么，以及如何查看和删除",
        "es-ES": "qué guarda el bot y cómo verlo y borrarlo",
        "es-419": "qué guarda el bot y cómo verlo y borrarlo",
    }  # English locales read the description itself
    [what] = recall["options"]
    assert what["name"] == "what" and what["description"] == WHAT
    assert what["description_localizations"]["zh-CN"] == "要找什么，可以带上时间"
    assert what["description_localizations"]["es-419"] == "qué buscar, opcionalmente con un momento"
    assert not help_["name_localizations"] and "name_localizations" not in what  # names stay


async def test_discord_localizations_are_in_english_when_the_default_is_another(
    dc: FakeDiscord, catalogs: Catalogs
) -> None:
    _, recall = await synced(dc, menu(catalogs, "zh"))
    assert recall["description"] == "回顾过去的对话"
    assert recall["description_localizations"]["en-US"] == RECALL
    assert recall["description_localizations"]["en-GB"] == RECALL
    assert "zh-CN" not in recall["description_localizations"]  # the description itself


async def test_a_long_translation_is_shortened_to_discords_100_characters(
    dc: FakeDiscord,
) -> None:
    long = "很长的描述" * 30
    translations = {"zh": CommandText(long, ("参数" * 80,)), "es": CommandText("", ("",))}
    spec = CommandSpec("echo", "repeat", (CommandArgument("text", "what", True),), translations)
    [echo] = await synced(dc, [spec])
    localized = echo["description_localizations"]["zh-CN"]
    assert len(localized) == 100 and localized.endswith("…") and localized.startswith("很长的描述")
    assert len(echo["options"][0]["description_localizations"]["zh-TW"]) == 100
    assert "es-ES" not in echo["description_localizations"]  # an empty text is no translation


# ----- the bot's own menu ----------------------------------------------------------------


async def test_every_command_of_the_bots_menu_is_described_in_every_language(
    services: Services,
) -> None:
    """The real menu, from the shipped catalogs: a command whose description is not marked
    for the catalogs (or not translated) would show English in the Chinese menu."""
    conversations = build_conversations(services, AccessPolicy.from_config(services.config))
    untranslated = [
        (spec.name, language, line)
        for spec in conversations.menu
        for language in ("zh", "es")
        for line, english in zip(
            (spec.text(language).description, *spec.text(language).arguments),
            (spec.description, *(a.description for a in spec.arguments)),
            strict=True,
        )
        if line == english
    ]
    assert untranslated == []
    assert {"help", "memory", "settings"} <= {spec.name for spec in conversations.menu}

"""/settings through `Conversations`: shown, changed by text and by button, refused in a
group, and written in the person's language after the change."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.app import Services, open_services
from gateway.commands import parse_command
from gateway.commands.choices import PendingChoices
from gateway.commands.registry import CommandContext, CommandRegistry
from gateway.commands.router import ERASED_LINE, CommandRouter
from gateway.commands.settings import settings_command
from gateway.conversation import Conversations
from gateway.messages import CHOICE_PREFIX, InboundMessage, MessageIdentity
from memory_core import PersonErasedError, PersonSettings, working
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import config_for, serving
from tests.gateway.sinks import ListSink

ADA, BOB = "42", "77"
NOON = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)


@pytest.fixture
async def services(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    config = config_for(fake.url, tmp_path / "data")
    config = config.model_copy(update={"clock_start": NOON})
    async with open_services(config) as opened:
        yield opened


def message(
    text: str, user: str = ADA, language: str | None = None, group: bool = False
) -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id="-5" if group else user,
        chat_type="group" if group else "private",
        user_id=user,
        text=text,
        language=language,
    )


async def send(conversations: Conversations, msg: InboundMessage) -> ListSink:
    sink = ListSink()
    await conversations.handle(msg, sink)
    return sink


async def say(conversations: Conversations, text: str, **kw: object) -> str:
    return (await send(conversations, message(text, **kw))).replies[-1]  # type: ignore[arg-type]


def chosen(services: Services, user: str = ADA) -> PersonSettings:
    assert services.locales.settings is not None
    return services.locales.settings.read(f"telegram-{user}")


async def test_settings_shows_the_defaults_with_their_sources_and_buttons(
    services: Services,
) -> None:
    conversations = serving(services)
    sink = await send(conversations, message("/settings"))
    shown = sink.replies[-1]
    assert "Language: English (the default)" in shown
    assert "Time zone: UTC, now 12:00 (the default)" in shown
    assert "Background notices: on (one line when I learn something) (the default)" in shown
    labels = [b.label for b in sink.buttons]
    assert labels[:4] == ["English", "简体中文", "Español", "Language: as my app"]
    assert labels[4:] == ["Notices: off", "Notices: on", "Notices: verbose", "Notices: default"]
    assert all(b.payload.startswith(CHOICE_PREFIX) for b in sink.buttons)
    hinted = await say(conversations, "/settings", user=BOB, language="es-419")
    assert "Idioma: Español (de tu aplicación)" in hinted  # the platform's hint, in Spanish


async def test_settings_language_en_switches_a_zh_hans_person_back_to_english(
    services: Services,
) -> None:
    conversations = serving(services)
    shown = await say(conversations, "/settings", language="zh-hans")
    assert "语言：简体中文（来自你的应用）" in shown
    changed = await say(conversations, "/settings language en", language="zh-hans")
    assert changed == "From now on I write to you in English."
    assert chosen(services).language == "en"
    after = await say(conversations, "/settings", language="zh-hans")
    assert "Language: English (you chose it)" in after
    back = await say(conversations, "/settings language auto", language="zh-hans")
    assert back == "我会重新用你应用的语言给你写：简体中文。"  # in the language it now has
    assert chosen(services).empty


async def test_a_change_is_answered_in_the_new_language(services: Services) -> None:
    conversations = serving(services)
    assert await say(conversations, "/settings language 中文") == "从现在起，我用简体中文给你写。"
    assert await say(conversations, "/settings idioma español") == (
        "A partir de ahora te escribo en Español."
    )
    assert chosen(services).language == "es"


async def test_timezone_by_name_and_offset_and_back_to_the_default(services: Services) -> None:
    conversations = serving(services)
    assert await say(conversations, "/settings timezone asia/shanghai") == (
        "Your time zone is Asia/Shanghai now (it is 20:00 there)."
    )
    assert chosen(services).timezone == "Asia/Shanghai"
    assert "Time zone: Asia/Shanghai, now 20:00 (you chose it)" in await say(
        conversations, "/settings"
    )
    assert await say(conversations, "/settings 时区 UTC-5") == (
        "Your time zone is UTC-5 now (it is 07:00 there)."
    )
    assert chosen(services).timezone == "UTC-5"
    assert await say(conversations, "/settings timezone auto") == (
        "Your time zone is the default again: UTC (now 12:00 there)."
    )
    assert chosen(services).timezone is None


async def test_unknown_values_and_settings_are_refused_in_one_line(services: Services) -> None:
    conversations = serving(services)
    zone = await say(conversations, "/settings timezone Mars/Olympus")
    assert zone.startswith("I don't know the time zone “Mars/Olympus”.") and "\n" not in zone
    assert await say(conversations, "/settings language klingon") == (
        "Languages I speak: zh (简体中文), en (English), es (Español), or auto."
    )
    assert await say(conversations, "/settings notices loud") == (
        "Background notices can be off, on, verbose, or auto."
    )
    assert await say(conversations, "/settings colour blue") == (
        "There is no setting called “colour”; the settings are language, timezone and notices."
    )
    assert (await say(conversations, "/settings notices")).startswith("Change a setting with")
    assert chosen(services).empty  # nothing was written
    refused = await say(conversations, "/settings timezone Mars/Olympus", language="zh-hans")
    assert refused.startswith("我不认识时区“Mars/Olympus”")


async def test_buttons_change_the_language_and_the_notices(services: Services) -> None:
    conversations = serving(services)
    sink = await send(conversations, message("/settings"))
    chinese = next(b for b in sink.buttons if b.label == "简体中文")
    pressed = ListSink()
    await conversations.choose(message(""), chinese.payload, pressed)
    assert pressed.replies == ["从现在起，我用简体中文给你写。"]
    assert chosen(services).language == "zh"
    again = ListSink()
    await conversations.choose(message(""), chinese.payload, again)  # used up
    assert chosen(services).language == "zh" and again.replies[-1] != pressed.replies[-1]
    sink = await send(conversations, message("/settings"))
    off = next(b for b in sink.buttons if b.label == "通知：关")
    stolen = ListSink()
    await conversations.choose(message("", user=BOB), off.payload, stolen)  # not Bob's
    assert chosen(services).notices is None and chosen(services, BOB).empty
    pressed = ListSink()
    await conversations.choose(message(""), off.payload, pressed)
    assert pressed.replies == ["后台通知：关（我学到东西时不说）。"]
    assert chosen(services).notices == "off"


async def test_numbered_picks_where_there_are_no_buttons(services: Services) -> None:
    conversations = serving(services)
    shown = await say(conversations, "/settings")
    assert "Send /settings #1 to /settings #8 to pick one of these:" in shown
    assert await say(conversations, "/settings #5") == (
        "Background notices: off (nothing is said when I learn something)."
    )
    assert chosen(services).notices == "off"
    assert await say(conversations, "/settings notices default") == (
        "Background notices are the default again: on (one line when I learn something)."
    )
    assert chosen(services).notices is None


async def test_in_a_group_settings_are_neither_shown_nor_changed(services: Services) -> None:
    conversations = serving(services)
    assert services.locales.settings is not None
    services.locales.settings.update(f"telegram-{ADA}", timezone="Asia/Shanghai")
    for text in ("/settings", "/settings language zh", "/settings timezone UTC"):
        sink = await send(conversations, message(text, group=True))
        line = sink.replies[-1]
        assert line.startswith("Your settings are yours alone") and "Nothing was changed" in line
        assert "Asia/Shanghai" not in line and sink.buttons == []
    assert chosen(services) == PersonSettings(timezone="Asia/Shanghai")
    zh = await say(conversations, "/settings", group=True, language="zh-hans")
    assert zh.startswith("你的设置只属于你")  # in the sender's language


async def test_a_person_erased_meanwhile_is_refused_and_nothing_is_kept(
    services: Services,
) -> None:
    command = settings_command(services.locales, PendingChoices(), "on")
    key = f"telegram-{ADA}"
    msg = message("/settings language zh")
    ctx = CommandContext(
        msg, MessageIdentity.of(msg), "language zh", False, services.locales.of_message(msg)
    )
    with working():  # this work began before the erasure below
        services.memory.fence.erasing(key)
        with pytest.raises(PersonErasedError):  # Conversations answers it in one line
            await command.handler(ctx)
    assert not (services.config.home / "memories" / "users" / key).exists()


async def test_a_button_pressed_while_the_person_is_erased_gets_the_erased_line(
    services: Services,
) -> None:
    choices = PendingChoices()
    registry = CommandRegistry()
    registry.register(settings_command(services.locales, choices, "on"))
    router = CommandRouter(registry, choices, lambda platform, user: False)
    msg = message("/settings", language="zh-hans")
    who, locale = MessageIdentity.of(msg), services.locales.of_message(msg)
    call = parse_command(msg.text)
    assert call is not None
    offered = ListSink()
    await router.route(who, msg, call, offered, locale)
    chinese = next(b for b in offered.buttons if b.label == "简体中文")
    pressed = ListSink()
    with working():  # the press began before the erasure below
        services.memory.fence.erasing(f"telegram-{ADA}")
        await router.choose(who, msg, chinese.payload, pressed, locale)
    await pressed.finish()
    assert pressed.replies == [locale._(ERASED_LINE)] and "删除" in pressed.replies[0]
    assert not (services.config.home / "memories" / "users" / f"telegram-{ADA}").exists()


async def test_half_hour_offsets_are_zones_and_offsets_off_earth_one_clear_line(
    services: Services,
) -> None:
    conversations = serving(services)
    assert await say(conversations, "/settings timezone UTC+5:30") == (
        "Your time zone is UTC+5:30 now (it is 17:30 there)."
    )
    assert chosen(services).timezone == "UTC+5:30"
    assert "(it is 17:45 there)" in await say(conversations, "/settings timezone UTC+05:45")
    for far in ("UTC-13", "UTC-14", "UTC+15"):
        refused = await say(conversations, f"/settings timezone {far}")
        assert refused.startswith(f"I don't know the time zone “{far}”.") and "\n" not in refused
    assert chosen(services).timezone == "UTC+5:45"

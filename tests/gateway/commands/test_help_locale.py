"""The built-in commands' own lines in the person's language and time zone: /help, /status,
a refused choice and /forget all, for a Chinese person beside an English one."""

from __future__ import annotations

import time
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

from gateway.app import Services
from gateway.commands.info import INTRO
from gateway.i18n import Translator
from gateway.messages import CHOICE_PREFIX, InboundMessage
from memory_core import Operation
from tests.fakes.openai import FakeOpenAI
from tests.gateway.commands.registries import builtin_registry
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink

CHINESE, ENGLISH = "8001", "8002"
SHANGHAI = ZoneInfo("Asia/Shanghai")


def message(text: str, user: str, language: str | None = None) -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id=user,
        chat_type="private",
        user_id=user,
        text=text,
        language=language,
    )


def chinese(services: Services) -> Translator:
    return services.locales.catalogs.translator("zh")


async def test_help_is_in_chinese_for_a_zh_hans_person_and_english_for_another(
    services: Services,
) -> None:
    conversations = serving(services)
    zh, en = ListSink(), ListSink()
    await conversations.handle(message("/help", CHINESE, "zh-hans"), zh)
    await conversations.handle(message("/help", ENGLISH, "en-US"), en)
    zh_reply, en_reply = zh.replies[0], en.replies[0]

    translator = chinese(services)
    assert translator._(INTRO) != INTRO and translator._(INTRO) in zh_reply
    assert INTRO not in zh_reply and "Commands:" not in zh_reply and "命令：" in zh_reply
    everyone = [c for c in builtin_registry(services) if not c.admin_only]
    for command in everyone:
        translated = translator._(command.description)
        assert translated != command.description, f"/{command.name} is not translated"
        assert f"/{command.name} — {translated}" in zh_reply
        assert f"/{command.name} — {command.description}" not in zh_reply
        assert f"/{command.name} — {command.description}" in en_reply
    assert INTRO in en_reply and "命令" not in en_reply


async def test_status_shows_the_session_start_in_the_persons_zone(
    fake: FakeOpenAI, services: Services
) -> None:
    key = f"telegram-{CHINESE}"
    assert services.locales.settings is not None
    services.locales.settings.update(key, timezone="Asia/Shanghai")
    conversations = serving(services)
    sink = ListSink()
    fake.say("Hello.")
    before = time.time()
    await conversations.handle(message("hi", CHINESE), sink)
    await conversations.handle(message("/status", CHINESE), sink)
    after = time.time()
    status = sink.replies[-1]

    def shown(ts: float, zone: tzinfo) -> str:
        return datetime.fromtimestamp(ts, zone).strftime("%Y-%m-%d %H:%M")

    in_shanghai = {
        f"Session: started {shown(t, SHANGHAI)} (Asia/Shanghai)" for t in (before, after)
    }
    assert any(line in status for line in in_shanghai), status
    assert not any(shown(t, UTC) in status for t in (before, after))  # eight hours apart
    assert "2 messages so far" in status


async def test_a_forged_choice_is_refused_in_the_persons_language(services: Services) -> None:
    conversations = serving(services)
    zh, en = ListSink(), ListSink()
    forged = CHOICE_PREFIX + "A" * 22
    await conversations.choose(message("", CHINESE, "zh-hans"), forged, zh)
    await conversations.choose(message("", ENGLISH), forged, en)
    refused = (
        "That choice is not valid any more (already used, expired or replaced by a newer "
        "list); nothing was changed."
    )
    assert en.replies == [refused]
    assert zh.replies == [chinese(services)._(refused)] and zh.replies[0] != refused


async def test_forget_all_is_confirmed_in_chinese_after_the_settings_are_erased(
    services: Services,
) -> None:
    key = f"telegram-{CHINESE}"
    assert services.locales.settings is not None
    services.memory.apply("user", key, [Operation("add", content="likes oolong")])
    services.locales.settings.update(key, language="zh")  # erased with the person's folder
    conversations = serving(services)
    sink = ListSink()
    await conversations.handle(message("/forget all", CHINESE), sink)
    asked = sink.replies[-1]
    translator = chinese(services)
    assert translator.n_("{n} memory entry", "{n} memory entries", 1) in asked
    assert "/forget all confirm" in asked and "This erases" not in asked
    assert [b.label for b in sink.buttons] == [translator._("Yes, erase everything")]

    await conversations.handle(message("/forget all confirm", CHINESE), sink)
    done = sink.replies[-1]
    assert done.startswith("已彻底删除"), done
    assert "Erased" not in done
    assert services.locales.settings.read(key).language is None  # the setting went too
    assert not services.memory.read("user", key).entries


async def test_forget_all_forgets_the_remembered_language_hint(services: Services) -> None:
    key = f"telegram-{CHINESE}"
    conversations = serving(services)
    sink = ListSink()
    await conversations.handle(message("/forget all", CHINESE, "zh-hans"), sink)
    assert services.locales.of_person(key).language == "zh"  # the hint, remembered
    await conversations.handle(message("/forget all confirm", CHINESE, "zh-hans"), sink)
    assert sink.replies[-1].startswith("已彻底删除")
    assert services.locales.of_person(key).language == "en"  # forgotten at the erasure

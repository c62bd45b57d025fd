"""Whose language and zone a line is written in: the person's setting, else their platform's
hint (the one of this message, else the latest remembered), else the configuration's."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.i18n import Catalogs
from gateway.messages import InboundMessage
from gateway.person_locale import PersonLocales
from memory_core import FileMemoryStore, PersonSettings, PersonSettingsStore
from tests.timing import scaled

NOON = datetime(2026, 3, 1, 20, 0, tzinfo=UTC).timestamp()


@pytest.fixture
def settings(tmp_path: Path) -> PersonSettingsStore:
    return PersonSettingsStore(FileMemoryStore(tmp_path / "data"))


def locales(settings: PersonSettingsStore, language: str = "en") -> PersonLocales:
    return PersonLocales(
        Catalogs(), settings, language=language, timezone="UTC", clock=lambda: NOON
    )


def message(user: str, language: str | None = None, group: bool = False) -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id="-5" if group else user,
        chat_type="group" if group else "private",
        user_id=user,
        text="hi",
        language=language,
    )


def test_the_setting_wins_over_the_hint_and_the_default(settings: PersonSettingsStore) -> None:
    people = locales(settings)
    settings.update("telegram-1", language="es")
    assert people.of_message(message("1", "zh-hans")).language == "es"
    assert people.of_person("telegram-1").language == "es"


def test_the_hint_then_the_remembered_hint_then_the_default(
    settings: PersonSettingsStore,
) -> None:
    people = locales(settings, language="es")
    assert people.of_message(message("2")).language == "es"  # nothing known: the config's
    assert people.of_message(message("2", "zh-hans")).language == "zh"  # this message's hint
    assert people.of_message(message("2")).language == "zh"  # remembered (Discord messages)
    assert people.of_person("telegram-2").language == "zh"  # for background notices
    assert people.of_message(message("2", "en-US")).language == "en"  # the latest hint
    assert people.of_message(message("2", "fr")).language == "en"  # not shipped: kept as was
    people.forget("telegram-2")  # erased: the hint is gone too
    assert people.of_person("telegram-2").language == "es"


def test_each_person_has_their_own_and_a_group_is_answered_in_the_senders(
    settings: PersonSettingsStore,
) -> None:
    people = locales(settings)
    settings.update("telegram-3", language="zh", timezone="Asia/Shanghai", notices="off")
    ada = people.of_message(message("3", group=True))
    bob = people.of_message(message("4", "es-ES", group=True))
    carl = people.of_message(message("5", group=True))
    assert (ada.language, bob.language, carl.language) == ("zh", "es", "en")
    assert ada._("Memory updated") == "记忆已更新" and carl._("Memory updated") == "Memory updated"
    assert (ada.zone_label, bob.zone_label) == ("Asia/Shanghai", "UTC")
    assert ada.day(NOON) == "2026-03-02" and bob.day(NOON) == "2026-03-01"
    assert (ada.notices, bob.notices) == ("off", None)
    assert ada.settings.language == "zh" and bob.settings.empty


def test_a_setting_that_is_no_longer_valid_falls_back(settings: PersonSettingsStore) -> None:
    people = locales(settings)
    settings.update("telegram-6", language="klingon", timezone="Mars/Olympus")
    found = people.of_message(message("6", "zh-CN"))
    assert (found.language, found.zone_label) == ("zh", "UTC")


def test_without_a_store_only_hints_and_the_config_decide() -> None:
    people = PersonLocales(Catalogs(), None, language="zh", timezone="UTC+8")
    assert people.of_message(message("7")).language == "zh"
    assert people.of_message(message("7", "es")).language == "es"
    assert people.default().zone_label == "UTC+8"


class StalledSettings(PersonSettingsStore):
    """A store whose reads hang until `go` is set (a database that does not answer)."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(FileMemoryStore(tmp_path / "stalled"))
        self.go = threading.Event()
        self.reads: list[str] = []

    def read(self, user_key: str) -> PersonSettings:
        self.reads.append(threading.current_thread().name)
        self.go.wait(scaled(30))
        return super().read(user_key)


async def test_a_settings_read_that_hangs_never_holds_the_loop(tmp_path: Path) -> None:
    store = StalledSettings(tmp_path)
    store.update("telegram-8", language="es")
    people = PersonLocales(Catalogs(), store, read_deadline=0.2)
    loop_thread = threading.current_thread().name
    ticks = 0

    async def ticking() -> None:  # the loop keeps running meanwhile
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(ticking())
    try:
        found = await people.arrived(message("8", "zh-hans"))  # never read before
        assert found.language == "zh"  # none stand in for what could not be read: the hint
        assert ticks >= 5
        assert loop_thread not in store.reads  # every read ran in a worker thread
        store.go.set()
        await asyncio.sleep(0)
        found = await people.arrived(message("8"))
        assert found.language == "es"  # read once the store answers
    finally:
        ticker.cancel()

"""`PersonSettingsStore`: a person's own settings beside USER.md, in their export and
erased with their folder, and refused once they are erased."""

from __future__ import annotations

import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core import (
    FileMemoryStore,
    InvalidArgumentsError,
    PersonData,
    PersonErasedError,
    PersonSettings,
    PersonSettingsStore,
    SessionStore,
    SkillsStore,
    working,
)

ADA, BOB = "telegram-42", "telegram-77"


@pytest.fixture
def memory(tmp_path: Path) -> FileMemoryStore:
    return FileMemoryStore(tmp_path / "data")


@pytest.fixture
async def sessions(tmp_path: Path) -> AsyncIterator[SessionStore]:
    store = SessionStore(tmp_path / "data" / "state.db")
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def folder(memory: FileMemoryStore, key: str) -> Path:
    return memory.path("user", key).parent


def test_settings_round_trip_per_person(memory: FileMemoryStore) -> None:
    store = PersonSettingsStore(memory)
    assert store.read(ADA) == PersonSettings() and store.read(ADA).empty
    assert store.update(ADA, language="zh", timezone="Asia/Shanghai") == PersonSettings(
        "zh", "Asia/Shanghai"
    )
    assert store.update(ADA, notices="off") == PersonSettings("zh", "Asia/Shanghai", "off")
    assert PersonSettingsStore(memory).read(ADA) == PersonSettings("zh", "Asia/Shanghai", "off")
    assert store.read(BOB).empty  # per person
    path = folder(memory, ADA) / "settings.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {
        "language": "zh",
        "timezone": "Asia/Shanghai",
        "notices": "off",
    }
    store.update(ADA, language=None, timezone=None, notices=None)  # all cleared: no file
    assert not path.exists() and store.read(ADA).empty


def test_bad_values_are_refused_and_nothing_is_written(memory: FileMemoryStore) -> None:
    store = PersonSettingsStore(memory)
    for changes in (
        {"colour": "blue"},
        {"notices": "loud"},
        {"language": " "},
        {"timezone": "x" * 65},
    ):
        with pytest.raises(InvalidArgumentsError):
            store.update(ADA, **changes)
    assert store.read(ADA).empty


@pytest.mark.parametrize(
    "body", [b"{not json", b"[1, 2]", b'{"language": 5, "notices": "loud"}', b"\xff\xfe{}"]
)
def test_an_unreadable_file_counts_as_no_settings(memory: FileMemoryStore, body: bytes) -> None:
    store = PersonSettingsStore(memory)
    store.update(ADA, timezone="UTC+8")
    (folder(memory, ADA) / "settings.json").write_bytes(body)
    assert store.read(ADA) == PersonSettings()
    assert store.update(ADA, language="es") == PersonSettings(language="es")  # set again


def test_a_person_erased_meanwhile_is_refused_and_leaves_no_folder(
    memory: FileMemoryStore,
) -> None:
    store = PersonSettingsStore(memory)
    with working():  # work that began before the erasure
        memory.fence.erasing(ADA)
        with pytest.raises(PersonErasedError):
            store.update(ADA, language="zh")
    assert not folder(memory, ADA).exists()
    assert store.read(ADA).empty


async def test_settings_are_exported_and_erased_with_the_person(
    memory: FileMemoryStore, sessions: SessionStore, tmp_path: Path
) -> None:
    root = tmp_path / "data"
    (root / "skills").mkdir(parents=True)
    skills = SkillsStore(root / "skills", root / "skills-manifest.json")
    store = PersonSettingsStore(memory)
    store.update(ADA, language="zh", timezone="Asia/Shanghai")
    store.update(BOB, notices="verbose")
    person = PersonData(memory, skills, sessions)
    out = tmp_path / "ada.jsonl"

    await person.export(ADA, out)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {"user": ADA, "settings": {"language": "zh", "timezone": "Asia/Shanghai"}} in records
    assert "verbose" not in out.read_text(encoding="utf-8")  # Bob's are not in it

    await person.erase(ADA)
    assert not folder(memory, ADA).exists()
    assert store.read(ADA).empty
    assert store.read(BOB) == PersonSettings(notices="verbose")
    await person.export(ADA, out)
    assert "settings" not in out.read_text(encoding="utf-8")

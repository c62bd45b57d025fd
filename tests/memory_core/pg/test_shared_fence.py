"""An erasure made by one replica fences the work another replica began before it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memory_core import (
    NewMessage,
    Operation,
    PersonErasedError,
    SessionOrigin,
    StorageSettings,
    open_storage,
    working,
)
from memory_core.fence import next_mark

ROOT = Path(__file__).resolve().parents[3]
ALICE, BOB = "telegram-1", "telegram-2"
SKILL = "---\nname: bees\ndescription: Keeping bees.\n---\n\nSmoke first, then open the hive.\n"


def _origin(user_key: str) -> SessionOrigin:
    chat = user_key.split("-")[1]
    return SessionOrigin(
        session_key=f"telegram:private:{chat}",
        source="telegram",
        user_key=user_key,
        chat_id=chat,
        chat_type="private",
    )


def _message(text: str, at: float) -> NewMessage:
    return NewMessage("user", text, at, platform_message_id=str(time.time_ns()))


async def test_work_begun_on_one_replica_before_another_erased_the_person_writes_nothing(
    tmp_path: Path, pg_database: str
) -> None:
    def settings(name: str) -> StorageSettings:
        return StorageSettings(home=tmp_path / name, skills_dir=ROOT / "skills", url=pg_database)

    async with open_storage(settings("a")) as eraser, open_storage(settings("b")) as slow:
        for user in (ALICE, BOB):
            slow.memory.apply("user", user, [Operation("add", content=f"{user} likes tea")])
        with working() as began:  # replica b's turn for Alice, still at the model
            pass
        assert eraser.fence.erasing(ALICE) > began  # replica a erases her meanwhile
        await eraser.sessions.delete_user(ALICE)
        eraser.memory.erase_user(ALICE)
        eraser.skills.erase_user(ALICE)

        with working(began):  # b's turn comes back and writes what it learned
            with pytest.raises(PersonErasedError):
                slow.memory.apply("user", ALICE, [Operation("add", content="keeps bees")])
            with pytest.raises(PersonErasedError):
                await slow.sessions.append_message(
                    origin=_origin(ALICE), message=_message("remember my bees", 1.0e9)
                )
            with pytest.raises(PersonErasedError):
                slow.skills.create("bees", SKILL, user_key=ALICE)
            # Bob, beside her on the same replica, is not fenced
            slow.memory.apply("user", BOB, [Operation("add", content="grows chillies")])
            await slow.sessions.append_message(
                origin=_origin(BOB), message=_message("my chillies", 1.0e9)
            )
        assert slow.memory.read("user", ALICE).entries == ()
        assert slow.memory.read("user", BOB).entries == (f"{BOB} likes tea", "grows chillies")

        later = next_mark() + 3_000_000_000  # her next message, past the clock margin
        with working(later):
            slow.memory.apply("user", ALICE, [Operation("add", content="back again")])
        assert slow.memory.read("user", ALICE).entries == ("back again",)

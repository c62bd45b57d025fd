"""`Withdrawal`: an edit withdraws the entries and the staged changes only the old text
grounded, keeps what the new text still grounds, and keeps a caption edit's media lines.
Real stores (state.db, the memory files); the open sessions are a recorder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.media import image_line
from gateway.messages import MessageEdit
from gateway.withdrawal import Withdrawal
from memory_core import (
    Evidence,
    FileMemoryStore,
    Operation,
    Origin,
    PendingChanges,
    Proposal,
    SearchScope,
    SessionStore,
)
from tests.memory_core.sessions.helpers import message, origin

ALICE = "telegram-1"


class Reloads:
    def __init__(self) -> None:
        self.keys: list[str] = []

    async def reload(self, user_key: str) -> None:
        self.keys.append(user_key)


@pytest.fixture
async def sessions(tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with SessionStore(tmp_path / "state.db") as store:
        yield store


def edit(message_id: str, text: str | None) -> MessageEdit:
    return MessageEdit("telegram", "telegram-1", "private", message_id, text, user_id="1")


async def said(sessions: SessionStore, text: str, platform_id: str, ts: float) -> int:
    written = await sessions.append_message(
        origin=origin(ALICE, chat="telegram-1"),
        message=message(text, ts, platform_message_id=platform_id),
    )
    return written.message_ids[0]


async def test_an_edit_withdraws_what_only_the_old_text_grounded(
    sessions: SessionStore, tmp_path: Path
) -> None:
    memory = FileMemoryStore(tmp_path / "memories")
    dog = await said(sessions, "I have a dog called Biscuit", "7", 1000.0)
    cello = await said(sessions, "I play the cello", "8", 1001.0)
    for content, grounding in (("Has a dog called Biscuit", dog), ("Plays the cello", cello)):
        evidence = (Evidence(grounding, content),)
        add = Operation("add", content=content, evidence=evidence)
        memory.apply("user", ALICE, [add], Origin("review", 1))
    staged = Proposal("add", "Biscuit is a dog", None, "waits", evidence=(Evidence(dog, "dog"),))
    PendingChanges(memory).stage(ALICE, [staged], Origin("review", 1), "b")
    reloads = Reloads()

    withdrawn = await Withdrawal(sessions, memory, reloads).edited(edit("7", "I have a cat"))

    assert withdrawn == ("Has a dog called Biscuit",)
    assert memory.read("user", ALICE).entries == ("Plays the cello",)
    [change] = memory.history("user", ALICE, limit=1)
    assert change.action == "remove" and change.origin.kind == "withdrawn"
    assert PendingChanges(memory).list(ALICE) == ()  # its staged change went with it
    assert reloads.keys == [ALICE]


async def test_an_edit_that_still_says_it_keeps_the_entry(
    sessions: SessionStore, tmp_path: Path
) -> None:
    memory = FileMemoryStore(tmp_path / "memories")
    dog = await said(sessions, "I have a dog called Biscuit", "7", 1000.0)
    evidence = (Evidence(dog, "I have a dog called Biscuit"),)
    add = Operation("add", content="Has a dog called Biscuit", evidence=evidence)
    memory.apply("user", ALICE, [add], Origin("review", 1))
    still = edit("7", "I have a dog called Biscuit, a beagle")
    assert await Withdrawal(sessions, memory, Reloads()).edited(still) == ()
    assert memory.read("user", ALICE).entries == ("Has a dog called Biscuit",)


async def test_a_caption_edit_keeps_what_the_picture_showed(
    sessions: SessionStore, tmp_path: Path
) -> None:
    memory = FileMemoryStore(tmp_path / "memories")
    shown = image_line("a red bicycle by a canal")
    await said(sessions, f"my bike\n{shown}", "7", 1000.0)
    await Withdrawal(sessions, memory, Reloads()).edited(edit("7", "my new bike"))
    scope = SearchScope(ALICE)
    [session] = await sessions.list_sessions(scope)
    texts = [m.content for m in await sessions.get_messages(session.id, scope)]
    assert texts == [f"my new bike\n{shown}"]

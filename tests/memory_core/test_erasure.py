"""`PersonData`: a person's data counted, exported and erased down to the bytes on disk."""

from __future__ import annotations

import json
import stat
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_core import (
    FileMemoryStore,
    HistoryRecallProvider,
    MemoryManager,
    MemoryProvider,
    NewMessage,
    Operation,
    Origin,
    PendingChanges,
    PersonData,
    Proposal,
    SearchScope,
    SessionOrigin,
    SessionStore,
    SkillsStore,
)

ALICE = "telegram-1001"
BOB = "telegram-2002"
ALICE_WORDS = ("zanzibarquokka", "Quixotrambler", "fjordwhistle")
BOB_WORDS = ("bobsledmarmalade",)


def skill(name: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: a skill\n---\n# Steps\n{body}\n"


class Home:
    def __init__(self, root: Path, sessions: SessionStore) -> None:
        self.root = root
        self.memory = FileMemoryStore(root)
        self.skills = SkillsStore(
            root / "skills",
            root / "skills-manifest.json",
            private_dir=root / "skills-private",
            archive_dir=root / "skills-archive",
        )
        self.sessions = sessions


@pytest.fixture
async def home(tmp_path: Path) -> AsyncIterator[Home]:
    (tmp_path / "skills").mkdir()
    store = SessionStore(tmp_path / "state.db")
    await store.open()
    try:
        yield Home(tmp_path, store)
    finally:
        await store.close()


async def fill(home: Home, user_key: str, words: Sequence[str]) -> None:
    """USER.md entries, private skills (one deleted into the archive) and two sessions."""
    home.memory.apply("user", user_key, [Operation("add", f"likes {w}") for w in words])
    home.skills.create("cooking", skill("cooking", f"Use {words[0]}."), user_key=user_key)
    home.skills.create("gone", skill("gone", f"Old {words[0]}."), user_key=user_key)
    home.skills.delete("gone", user_key=user_key)  # archived under skills-archive/<key>/
    for chat in ("private", "group"):
        origin = SessionOrigin(
            session_key=f"telegram:{chat}:{user_key}",
            source="telegram",
            user_key=user_key,
            chat_id=f"c-{user_key}-{chat}",
            chat_type=chat,  # type: ignore[arg-type]
        )
        messages = [
            NewMessage("user", f"tell me about {w} please", 1000.0 + i, key=f"{chat}{i}")
            for i, w in enumerate(words)
        ]
        await home.sessions.append_messages(origin=origin, messages=messages)
        # the stored prompt goes with the session row
        info = await home.sessions.current_session(origin.session_key)
        assert info is not None
        await home.sessions.set_system_prompt(info.id, f"prompt mentioning {words[0]}")


def files_holding(root: Path, words: Sequence[str]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.name}:{w}" for w in words if w.encode() in data]
    return found


async def test_holdings_count_everything(home: Home) -> None:
    await fill(home, ALICE, ALICE_WORDS)
    held = await PersonData(home.memory, home.skills, home.sessions).holdings(ALICE)
    assert (held.entries, held.sessions, held.messages, held.skills) == (3, 2, 6, 1)
    assert held.summary() == "3 memory entries, 2 sessions (6 messages) and 1 skill"


async def test_erase_leaves_no_byte_of_the_person_and_keeps_the_other(home: Home) -> None:
    await fill(home, ALICE, ALICE_WORDS)
    await fill(home, BOB, BOB_WORDS)
    assert files_holding(home.root, ALICE_WORDS)  # the scan finds them before

    erased = await PersonData(home.memory, home.skills, home.sessions).erase(ALICE)

    assert (erased.entries, erased.sessions, erased.messages, erased.skills) == (3, 2, 6, 1)
    assert files_holding(home.root, ALICE_WORDS) == []  # state.db, its WAL, FTS shadows, files
    assert not (home.root / "memories" / "users" / ALICE).exists()
    assert not (home.root / "skills-private" / ALICE).exists()
    assert not (home.root / "skills-archive" / ALICE).exists()
    for word in ALICE_WORDS:  # as anyone: every user key sees nothing
        for key in (ALICE, BOB):
            assert await home.sessions.search(word, SearchScope(user_key=key)) == []
    # Bob is untouched
    assert home.memory.read("user", BOB).entries == (f"likes {BOB_WORDS[0]}",)
    assert [s.name for s in home.skills.skills(BOB) if s.user_key == BOB] == ["cooking"]
    hits = await home.sessions.search(BOB_WORDS[0], SearchScope(user_key=BOB))
    assert len(hits) == 2
    assert files_holding(home.root, BOB_WORDS)
    after = await PersonData(home.memory, home.skills, home.sessions).holdings(ALICE)
    assert after.empty


async def test_export_is_one_private_file_of_entries_and_import_lines(home: Home) -> None:
    await fill(home, ALICE, ALICE_WORDS)
    await fill(home, BOB, BOB_WORDS)
    out = home.root / "exports" / "alice.jsonl"

    result = await PersonData(home.memory, home.skills, home.sessions).export(ALICE, out)

    assert (result.entries, result.messages) == (3, 6)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["memory_entry"] for r in records[:3]] == [f"likes {w}" for w in ALICE_WORDS]
    assert {r["user"] for r in records} == {ALICE}
    changes = [r["memory_change"] for r in records[3:6]]  # then her history, oldest first
    assert [(c["action"], c["after"]) for c in changes] == [
        ("add", f"likes {w}") for w in ALICE_WORDS
    ]
    assert all(r["role"] == "user" for r in records[6:])
    assert BOB_WORDS[0] not in out.read_text()


async def test_export_lists_the_persons_staged_changes_after_her_history(home: Home) -> None:
    await fill(home, ALICE, ALICE_WORDS)
    await fill(home, BOB, BOB_WORDS)
    pending = PendingChanges(home.memory)
    review = Origin("review", session_id=7)
    pending.stage(ALICE, [Proposal("add", "wants zebrawaffle", None, "it waits")], review, "b1")
    against = f"likes {ALICE_WORDS[1]}"
    pending.stage(ALICE, [Proposal("remove", None, against, "it waits too")], review, "b2")
    pending.stage(BOB, [Proposal("add", "wants bobcatpudding", None, "it waits")], review, "b3")
    out = home.root / "exports" / "alice.jsonl"

    await PersonData(home.memory, home.skills, home.sessions).export(ALICE, out)

    records = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = [next(k for k in r if k != "user") for r in records]
    first = kinds.index("memory_pending")
    assert (
        kinds[first - 1] == "memory_change" and kinds[first : first + 2] == ["memory_pending"] * 2
    )
    staged = [r["memory_pending"] for r in records if "memory_pending" in r]
    assert [(c["id"], c["action"], c["content"], c["against"]) for c in staged] == [
        (1, "add", "wants zebrawaffle", None),
        (2, "remove", None, against),
    ]
    assert staged[0]["reason"] == "it waits" and staged[0]["origin"]["kind"] == "review"
    assert staged[0]["created"] < staged[0]["expires"]
    assert "bobcatpudding" not in out.read_text()


async def test_erasing_the_person_erases_her_staged_changes_not_anothers(home: Home) -> None:
    pending = PendingChanges(home.memory)
    review = Origin("review")
    pending.stage(ALICE, [Proposal("add", "wants zebrawaffle", None, "waits")], review, "b1")
    pending.stage(BOB, [Proposal("add", "wants bobcatpudding", None, "waits")], review, "b2")
    assert home.memory.peek_record(ALICE, "USER.pending.json") is not None

    await PersonData(home.memory, home.skills, home.sessions).erase(ALICE)

    assert home.memory.peek_record(ALICE, "USER.pending.json") is None
    assert pending.list(ALICE) == ()
    assert files_holding(home.root, ("zebrawaffle",)) == []
    assert [c.content for c in pending.list(BOB)] == ["wants bobcatpudding"]


class Keeper(MemoryProvider):
    """An external provider with a store of its own."""

    name = "keeper"

    def __init__(self, data: dict[str, str]) -> None:
        self.data = data

    async def erase_user(self, user_key: str) -> None:
        self.data.pop(user_key, None)


class Forgetful(MemoryProvider):
    """A provider that never said how it erases."""

    name = "forgetful"

    async def handle_tool_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        return ""


async def test_providers_erase_or_report_that_they_cannot(home: Home) -> None:
    data = {ALICE: "a", BOB: "b"}
    manager = MemoryManager([HistoryRecallProvider(home.sessions)], external=Keeper(data))
    person = PersonData(home.memory, home.skills, home.sessions, manager.erase_user)
    erased = await person.erase(ALICE)
    assert data == {BOB: "b"}
    assert erased.provider_failures == ()

    failing = MemoryManager(external=Forgetful())
    report = await PersonData(home.memory, home.skills, home.sessions, failing.erase_user).erase(
        BOB
    )
    assert report.provider_failures == (
        "forgetful: memory provider 'forgetful' does not implement erase_user: "
        "its data about a person cannot be erased",
    )


async def test_a_chat_export_is_one_file_replaced_discarded_and_swept(home: Home) -> None:
    await fill(home, ALICE, ALICE_WORDS)
    exports = home.root / "exports"
    person = PersonData(home.memory, home.skills, home.sessions, exports_dir=exports)
    first = await person.export_for_chat(ALICE)
    home.memory.apply("user", ALICE, [Operation("remove", old_text=f"likes {ALICE_WORDS[0]}")])

    second = await person.export_for_chat(ALICE)

    assert first.path == second.path == person.chat_export_path(ALICE)
    assert [p.name for p in (exports / ALICE).iterdir()] == [second.path.name]  # no temp left
    assert stat.S_IMODE(second.path.stat().st_mode) == 0o600
    records = [json.loads(line) for line in second.path.read_text().splitlines()]
    entries = [r["memory_entry"] for r in records if "memory_entry" in r]
    assert f"likes {ALICE_WORDS[0]}" not in entries  # the removed entry is gone from USER.md
    # but its removal is in the history, undoable, until /forget all
    changes = [r["memory_change"] for r in records if "memory_change" in r]
    assert changes[-1]["before"] == f"likes {ALICE_WORDS[0]}"
    assert person.sweep_exports(600) == 0  # fresh: kept
    assert person.sweep_exports(600, now=time.time() + 601) == 1
    assert not second.path.exists()
    await person.export_for_chat(ALICE)
    assert person.discard_export(ALICE) and not person.discard_export(ALICE)


async def test_the_persons_other_files_go_with_them_and_the_others_stay(home: Home) -> None:
    """`person_files` (the console's history of what each person typed) are erased too."""
    folder = home.root / "console"
    folder.mkdir()
    for key in (ALICE, BOB):
        (folder / f"{key}.history").write_text(f"+typed by {key}\n")

    def histories(key: str) -> list[Path]:
        return [folder / f"{key}.history"]

    person = PersonData(home.memory, home.skills, home.sessions, person_files=histories)
    await person.erase(ALICE)
    assert sorted(p.name for p in folder.iterdir()) == [f"{BOB}.history"]

"""`forget` on both stores: the entry goes, live or archived, with every copy of its text
(earlier versions too) from every file or row, its staged changes and its evidence; what
is kept is that it was forgotten, and when; no undo brings it back, other changes still
undo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_core.errors import MemoryDriftError, UndoRefusedError
from memory_core.file_memory.edits import Operation
from memory_core.file_memory.forgetting import ForgetResult
from memory_core.file_memory.ledger import FORGOTTEN_CHANGE, NOTHING_TO_UNDO
from memory_core.file_memory.origin import OPERATOR, Evidence, Origin
from memory_core.file_memory.pending import PENDING_FILE, PendingChanges, Proposal
from memory_core.file_memory.store import FileMemoryStore
from tests.memory_core.pg.memory_backends import Backend

ALICE, BOB = "telegram-1001", "discord-2002"
PERSON = Origin("person", session_id=7)
REVIEW = Origin("review", session_id=8)
DOG = "Alice has a dog called Biscuit"
PUPPY = "Alice has a puppy called Biscuit"
SAID = (Evidence(201, "my dog Biscuit chewed my shoes"),)
PUPPY_SAID = (Evidence(202, "Biscuit is still a puppy"), Evidence(203, "a puppy, really"))


def add(
    backend: Backend, text: str, origin: Origin = PERSON, evidence: tuple[Evidence, ...] = ()
) -> None:
    op = Operation("add", content=text, evidence=evidence)
    backend.store.apply("user", ALICE, [op], origin)


def entries(backend: Backend) -> tuple[str, ...]:
    return backend.store.read("user", ALICE).entries


def test_a_live_entry_and_its_earlier_versions_leave_no_trace(memory_backend: Backend) -> None:
    store = memory_backend.store
    add(memory_backend, "Alice drinks green tea")
    add(memory_backend, PUPPY, PERSON, PUPPY_SAID)
    store.apply("user", ALICE, [Operation("replace", content=DOG, old_text="puppy", evidence=SAID)])
    store.apply("user", BOB, [Operation("add", content="Bob has a dog called Biscuit too")])
    pending = PendingChanges(store)
    pending.stage(
        ALICE,
        [
            Proposal("replace", "Alice has an old dog called Biscuit", DOG, "why", evidence=SAID),
            Proposal("add", "Alice likes rain", None, "why"),
        ],
        REVIEW,
        "batch",
    )
    assert memory_backend.holding("called Biscuit")  # before: in the entries, history, pending

    result = store.forget(ALICE, [DOG, "nothing like it"], PERSON)

    assert result == ForgetResult((DOG,), (201, 202, 203), tuple(sorted((DOG, PUPPY))))
    assert entries(memory_backend) == ("Alice drinks green tea",)
    for text in (DOG, PUPPY, "Alice has an old dog", "chewed my shoes", "still a puppy"):
        assert memory_backend.holding(text) == [], text
    assert [c.content for c in pending.list(ALICE)] == ["Alice likes rain"]
    assert store.read("user", BOB).entries == ("Bob has a dog called Biscuit too",)
    history = store.history("user", ALICE, None)
    assert [(c.id, c.action, c.before, c.after) for c in history] == [
        (4, "forget", None, None),
        (3, "forgotten", None, None),  # the replace, its text gone
        (2, "forgotten", None, None),  # the puppy's add
        (1, "add", None, "Alice drinks green tea"),
    ]
    assert history[0].origin == PERSON and history[1].origin == OPERATOR


def test_no_undo_brings_it_back_and_the_other_changes_still_undo(memory_backend: Backend) -> None:
    store = memory_backend.store
    add(memory_backend, "Alice drinks green tea")
    add(memory_backend, DOG, PERSON, SAID)
    store.forget(ALICE, [DOG], PERSON)
    for change_id in (2, 3):
        with pytest.raises(UndoRefusedError) as refused:
            store.undo("user", ALICE, change_id, PERSON)
        assert refused.value.template == FORGOTTEN_CHANGE
        assert str(refused.value) == (
            f"Change {change_id} can't be undone: it was about an entry you asked me to "
            "forget, and that is for good."
        )
    undone = store.undo("user", ALICE, None, PERSON)  # the latest it may: the tea's add
    assert undone.undone.id == 1 and entries(memory_backend) == ()
    assert memory_backend.holding(DOG) == [] and memory_backend.holding("Biscuit") == []
    with pytest.raises(UndoRefusedError) as nothing:  # an undo is not undone; nothing is left
        store.undo("user", ALICE, None, PERSON)
    assert nothing.value.template == NOTHING_TO_UNDO


def test_an_archived_entry_is_forgotten_too(memory_backend: Backend) -> None:
    store = memory_backend.store
    archived = "Review: Alice has a dog called Biscuit, a beagle, " + "b" * 40
    add(memory_backend, archived, REVIEW, SAID)
    add(memory_backend, "Alice said: I live in Oslo near the fjord " + "y" * 30)
    store.apply("user", ALICE, [Operation("add", content="Alice said: " + "z" * 90)], PERSON)
    assert [a.text for a in store.archived(ALICE)] == [archived]

    assert store.forget(ALICE, [archived], PERSON) == ForgetResult((archived,), (201,), (archived,))

    assert store.archived(ALICE) == []
    assert memory_backend.holding("Biscuit") == [] and memory_backend.holding("beagle") == []
    assert [c.action for c in store.history("user", ALICE, None)] == [
        "forget",
        "add",
        "forgotten",  # the archive line
        "add",
        "forgotten",  # the review's add
    ]
    assert len(entries(memory_backend)) == 2


def test_forgetting_what_is_not_held_changes_nothing(memory_backend: Backend) -> None:
    add(memory_backend, DOG, PERSON, SAID)
    before = memory_backend.store.history("user", ALICE, None)
    assert memory_backend.store.forget(ALICE, ["Alice has a cat"], PERSON) == ForgetResult((), ())
    assert memory_backend.store.forget(BOB, [DOG], PERSON) == ForgetResult((), ())
    assert memory_backend.store.user_keys() == [ALICE]  # nothing is made for Bob
    assert memory_backend.store.history("user", ALICE, None) == before
    assert entries(memory_backend) == (DOG,)


def test_an_earlier_version_written_again_is_kept(memory_backend: Backend) -> None:
    store = memory_backend.store
    add(memory_backend, PUPPY)
    store.apply("user", ALICE, [Operation("replace", content=DOG, old_text=PUPPY)])
    add(memory_backend, PUPPY)  # the same words again, an entry of its own
    store.forget(ALICE, [DOG], PERSON)
    assert entries(memory_backend) == (PUPPY,)
    assert memory_backend.holding(DOG) == []
    assert [o.text for o in store.origins("user", ALICE)] == [PUPPY]


def test_the_files_backups_lose_the_text_and_every_file_is_replaced(tmp_path: Path) -> None:
    store = FileMemoryStore(tmp_path)
    store.apply("user", ALICE, [Operation("add", content=DOG)], PERSON)
    store.apply("user", ALICE, [Operation("add", content="Alice drinks green tea")], PERSON)
    path = store.path("user", ALICE)
    path.write_text(path.read_text() + "§\n\n§\nhand edit\n")  # out of shape: a backup is kept
    with pytest.raises(MemoryDriftError):
        store.apply("user", ALICE, [Operation("add", content="Alice likes rain")], PERSON)
    path.write_text(f"{DOG}\n§\nAlice drinks green tea\n")  # the operator fixed it
    (backup,) = path.parent.glob("USER.md.bak.*")
    held = {
        p.name: p.stat().st_ino for p in path.parent.iterdir() if DOG.encode() in p.read_bytes()
    }
    assert set(held) == {"USER.md", "USER.entries.json", "USER.history.jsonl", backup.name}

    store.forget(ALICE, [DOG], PERSON)

    for item in path.parent.iterdir():
        assert DOG.encode() not in item.read_bytes(), item.name
    for name, inode in held.items():  # each replaced whole: the old file, and its blocks, gone
        assert path.with_name(name).stat().st_ino != inode, name
    assert "hand edit" in backup.read_text()  # the rest of the copy is kept
    records = json.loads(path.with_name("USER.entries.json").read_text())
    assert list(records["entries"]) == ["Alice drinks green tea"]


def test_unreadable_staged_changes_are_left_as_they_are(memory_backend: Backend) -> None:
    add(memory_backend, DOG)
    with memory_backend.store.person_record(ALICE, PENDING_FILE) as record:
        record.write("not json")
    memory_backend.store.forget(ALICE, [DOG], PERSON)
    assert memory_backend.store.peek_record(ALICE, PENDING_FILE) == "not json"
    assert entries(memory_backend) == ()


def test_the_messages_it_rested_on_leave_every_other_evidence_too(
    memory_backend: Backend,
) -> None:
    store = memory_backend.store
    walks = (Evidence(205, "we walk at seven"),)
    add(memory_backend, DOG, PERSON, SAID)
    add(memory_backend, "Alice walks her dog at seven", PERSON, SAID + walks)
    proposal = Proposal("add", "Alice's dog chews shoes", None, "why", evidence=SAID + walks)
    PendingChanges(store).stage(ALICE, [proposal], REVIEW, "batch")

    assert store.forget(ALICE, [DOG], PERSON).message_ids == (201,)

    (walk,) = store.origins("user", ALICE)
    assert walk.evidence == walks  # learned from message 201 too, which is forgotten
    assert [c.evidence for c in store.history("user", ALICE, None) if c.after] == [walks]
    (staged,) = PendingChanges(store).list(ALICE)
    assert staged.evidence == walks
    assert memory_backend.holding("chewed my shoes") == []

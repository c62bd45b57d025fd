"""Evidence lives with the entry, on both stores: through apply, undo, the archive, staging
and approval, the export and a move to PostgreSQL; the origin "withdrawn"; and after
1,200 changes (the history trimmed) the person's first entry is still theirs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_core import PersonData, SessionStore, SkillsStore
from memory_core.errors import OverBudgetError
from memory_core.fence import ErasureFence
from memory_core.file_memory.digest import canonical_listing
from memory_core.file_memory.edits import Operation
from memory_core.file_memory.ledger import HISTORY_LIMIT, HISTORY_SLACK
from memory_core.file_memory.origin import OPERATOR, Evidence, Origin
from memory_core.file_memory.pending import PendingChanges, Proposal
from memory_core.file_memory.store import FileMemoryStore
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.memory import PgMemoryStore
from memory_core.pg.memory_schema import MEMORY_MIGRATIONS
from tests.memory_core.pg.memory_backends import Backend

ALICE = "telegram-1001"
PERSON = Origin("person", session_id=7)
REVIEW = Origin("review", session_id=8)
TEA = (Evidence(101, "I drink green tea every morning"),)
BLACK = (Evidence(102, "I switched to black tea"), Evidence(103, "black, no milk"))
CATS = (Evidence(104, "my two cats, Miso and Tofu"),)


def add(store: object, text: str, origin: Origin, evidence: tuple[Evidence, ...] = ()) -> None:
    store.apply("user", ALICE, [Operation("add", content=text, evidence=evidence)], origin)  # type: ignore[attr-defined]


def evidence_of(backend: Backend, text: str) -> tuple[Evidence, ...]:
    (found,) = [o for o in backend.store.origins("user", ALICE) if o.text == text]
    return found.evidence


def test_an_entry_keeps_its_evidence_through_replace_remove_and_undo(
    memory_backend: Backend,
) -> None:
    store = memory_backend.store
    add(store, "Alice drinks green tea", PERSON, TEA)
    add(store, "Alice is learning Welsh", OPERATOR)
    assert evidence_of(memory_backend, "Alice drinks green tea") == TEA
    assert evidence_of(memory_backend, "Alice is learning Welsh") == ()
    replace = Operation(
        "replace", content="Alice drinks black tea", old_text="green", evidence=BLACK
    )
    store.apply("user", ALICE, [replace], PERSON)
    assert evidence_of(memory_backend, "Alice drinks black tea") == BLACK
    (line, *_) = store.history("user", ALICE)
    assert (line.evidence, line.before_evidence) == (BLACK, TEA)
    store.apply("user", ALICE, [Operation("remove", old_text="black")], OPERATOR)
    (removal, *_) = store.history("user", ALICE)
    assert (removal.evidence, removal.before_evidence) == ((), BLACK)

    store.undo("user", ALICE, None, PERSON)  # the removal: back with its evidence and writer
    back = next(o for o in store.origins("user", ALICE) if o.text == "Alice drinks black tea")
    assert (back.origin, back.evidence) == (PERSON, BLACK)
    store.undo("user", ALICE, 3, PERSON)  # the replace: green tea is back, with its own
    assert evidence_of(memory_backend, "Alice drinks green tea") == TEA
    assert store.read("user", ALICE).entries == (
        "Alice is learning Welsh",
        "Alice drinks green tea",
    )


def test_an_archived_entry_keeps_its_evidence_and_an_undo_brings_it_back(
    memory_backend: Backend,
) -> None:
    store = memory_backend.store
    add(store, "Review: Alice has two cats called Miso and Tofu, " + "x" * 40, REVIEW, CATS)
    add(store, "Alice said: I live in Oslo near the fjord " + "y" * 30, PERSON, TEA)
    result = store.apply(
        "user", ALICE, [Operation("add", content="Alice said: " + "z" * 90)], PERSON
    )
    (moved,) = result.archived
    (archived,) = store.archived(ALICE)
    assert (archived.text, archived.origin, archived.evidence) == (moved, REVIEW, CATS)
    assert json.loads(json.dumps(archived.as_json()))["evidence"][0]["message_id"] == 104
    store.apply("user", ALICE, [Operation("remove", old_text="zzz")], PERSON)
    store.undo("user", ALICE, archived.change_id, PERSON)
    (back,) = [o for o in store.origins("user", ALICE) if o.text == moved]
    assert (back.origin, back.evidence) == (REVIEW, CATS)
    assert store.archived(ALICE) == []


def test_a_staged_change_keeps_its_evidence_and_approval_writes_it(
    memory_backend: Backend,
) -> None:
    pending = PendingChanges(memory_backend.store)
    proposal = Proposal("add", "Alice drinks green tea", None, "not in your words", evidence=TEA)
    (staged,) = pending.stage(ALICE, [proposal], REVIEW, "batch")
    assert staged.evidence == TEA
    (listed,) = pending.list(ALICE)
    assert listed.evidence == TEA and listed.as_json()["evidence"][0]["span"] == TEA[0].span
    decision = pending.approve(ALICE)
    assert [c.id for c in decision.applied] == [staged.id]
    (entry,) = memory_backend.store.origins("user", ALICE)
    assert (entry.text, entry.origin, entry.evidence) == ("Alice drinks green tea", REVIEW, TEA)


def test_withdrawn_is_a_removal_that_undoes_like_any_other(memory_backend: Backend) -> None:
    store = memory_backend.store
    add(store, "Alice lives in Porto", PERSON, TEA)
    withdrawn = Origin("withdrawn", session_id=7)
    store.apply("user", ALICE, [Operation("remove", old_text="Alice lives in Porto")], withdrawn)
    (line, *_) = store.history("user", ALICE)
    assert (line.action, line.origin, line.origin.label()) == (
        "remove",
        withdrawn,
        "withdrawn: source edited",
    )
    undone = store.undo("user", ALICE, None, PERSON)
    assert undone.undone.origin == withdrawn
    (entry,) = store.origins("user", ALICE)
    assert (entry.text, entry.origin, entry.evidence) == ("Alice lives in Porto", PERSON, TEA)


async def test_the_export_holds_the_evidence(memory_backend: Backend, tmp_path: Path) -> None:
    add(memory_backend.store, "Alice drinks green tea", PERSON, TEA)
    add(memory_backend.store, "Alice is learning Welsh", OPERATOR)
    (tmp_path / "skills").mkdir()
    skills = SkillsStore(tmp_path / "skills", tmp_path / "manifest.json")
    async with SessionStore(tmp_path / "state.db") as sessions:
        out = tmp_path / "export.jsonl"
        await PersonData(memory_backend.store, skills, sessions).export(ALICE, out)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0] == {
        "user": ALICE,
        "memory_entry": "Alice drinks green tea",
        "evidence": [{"message_id": 101, "span": TEA[0].span}],
    }
    assert lines[1] == {"user": ALICE, "memory_entry": "Alice is learning Welsh"}
    assert lines[2]["memory_change"]["evidence"] == [{"message_id": 101, "span": TEA[0].span}]


def test_a_move_to_postgresql_copies_the_evidence(tmp_path: Path, pg_database: str) -> None:
    files = FileMemoryStore(tmp_path, user_char_limit=200)
    add(files, "Review: Alice has two cats called Miso and Tofu, " + "x" * 40, REVIEW, CATS)
    add(files, "Alice drinks green tea", PERSON, TEA)
    files.apply("user", ALICE, [Operation("add", content="Alice said: " + "z" * 90)], PERSON)
    PendingChanges(files).stage(
        ALICE, [Proposal("add", "Alice drinks black tea", None, "why", evidence=BLACK)], REVIEW, "b"
    )
    with PgSyncDatabase(pg_database, max_size=2) as db:
        db.migrate(MEMORY_MIGRATIONS)
        rows = PgMemoryStore(db, fence=ErasureFence(), user_char_limit=200)
        rows.import_from(files)
        assert rows.content_digest() == files.content_digest()
        assert canonical_listing(rows) == canonical_listing(files)
        assert [o.evidence for o in rows.origins("user", ALICE)] == [TEA, ()]
        assert [a.evidence for a in rows.archived(ALICE)] == [CATS]
        assert PendingChanges(rows).list(ALICE)[0].evidence == BLACK
    unlike = FileMemoryStore(tmp_path / "other", user_char_limit=200)
    add(unlike, "Alice drinks green tea", PERSON)  # the same entry without its evidence
    assert canonical_listing(unlike)[1]["entries"][0][3] == []


@pytest.mark.slow  # 1,200 writes on each store
def test_after_1200_changes_the_first_entry_is_still_the_persons_and_archived_last(
    memory_backend: Backend,
) -> None:
    store = memory_backend.store
    first = "Alice said: I was born in Bergen"
    add(store, first, PERSON, TEA)
    add(store, "Operator note: Alice is a beta tester", OPERATOR)
    add(store, "Review: Alice likes long walks", REVIEW, CATS)
    add(store, "counter 0", OPERATOR)
    changes = 1200
    for i in range(1, changes + 1):
        op = Operation("replace", content=f"counter {i}", old_text=f"counter {i - 1}")
        store.apply("user", ALICE, [op], OPERATOR)
    history = store.history("user", ALICE, None)
    assert len(history) <= HISTORY_LIMIT + HISTORY_SLACK
    assert all(c.after != first for c in history)  # its add was trimmed away
    (mine,) = [o for o in store.origins("user", ALICE) if o.text == first]
    assert (mine.origin, mine.evidence) == (PERSON, TEA)

    moved = []  # what each add that overflows moves out, in turn
    for size in (80, 20, 13):
        add_one = Operation("add", content="Alice said: " + "w" * size)
        moved.append(store.apply("user", ALICE, [add_one], PERSON).archived)
    assert moved == [
        ("Operator note: Alice is a beta tester",),  # the operator's first, oldest first
        (f"counter {changes}",),  # the operator's again, though newer than the review's
        ("Review: Alice likes long walks",),  # learned from her words: after those
    ]
    with pytest.raises(OverBudgetError):  # her own entries never go
        store.apply("user", ALICE, [Operation("add", content="z" * 60)], PERSON)
    (mine,) = [o for o in store.origins("user", ALICE) if o.text == first]
    assert (mine.origin, mine.evidence) == (PERSON, TEA)

"""The memory ledger: every entry change with its origin, undo, a bounded history, the archive."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from memory_core.errors import MemoryFileError, OverBudgetError
from memory_core.file_memory.edits import Operation
from memory_core.file_memory.ledger import (
    HISTORY_LIMIT,
    HISTORY_SLACK,
    Draft,
    UndoRefusedError,
    append_changes,
    read_changes,
)
from memory_core.file_memory.origin import OPERATOR, Evidence, Origin
from memory_core.file_memory.store import FileMemoryStore
from tests.timing import scaled

ALICE, BOB = "telegram-1", "telegram-2"
ME = Origin("person", 7)
REVIEW = Origin("review", 7)


@pytest.fixture
def store(tmp_path: Path) -> FileMemoryStore:
    return FileMemoryStore(tmp_path, user_char_limit=200)


def add(store: FileMemoryStore, text: str, origin: Origin = ME, key: str = ALICE) -> None:
    store.apply("user", key, [Operation("add", content=text)], origin)


def history_lines(store: FileMemoryStore, key: str = ALICE) -> list[dict[str, object]]:
    path = store.path("user", key).with_name("USER.history.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_change_is_one_line_beside_user_md_with_its_origin(store: FileMemoryStore) -> None:
    add(store, "Likes tea")
    store.apply(
        "user", ALICE, [Operation("replace", old_text="tea", content="Likes green tea")], REVIEW
    )
    store.apply("user", ALICE, [Operation("remove", old_text="green")])
    path = store.path("user", ALICE).with_name("USER.history.jsonl")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = history_lines(store)
    assert [(c["id"], c["action"], c["before"], c["after"]) for c in lines] == [
        (1, "add", None, "Likes tea"),
        (2, "replace", "Likes tea", "Likes green tea"),
        (3, "remove", "Likes green tea", None),
    ]
    assert lines[0]["origin"] == {"kind": "person", "session_id": 7, "by": None}
    assert lines[1]["origin"] == {"kind": "review", "session_id": 7, "by": None}
    assert lines[2]["origin"] == {"kind": "operator", "session_id": None, "by": None}
    assert all(c["undoes"] is None and isinstance(c["at"], float) for c in lines)
    assert store.path("user", ALICE).read_text() == ""  # USER.md stays plain text


def test_an_entry_edited_by_hand_on_disk_shows_as_the_operators(store: FileMemoryStore) -> None:
    add(store, "Likes tea")
    add(store, "Plays chess", REVIEW)
    path = store.path("user", ALICE)
    path.write_text(path.read_text().replace("Plays chess", "Plays chess badly"))
    origins = {o.text: (o.origin.kind, o.at is None) for o in store.origins("user", ALICE)}
    assert origins == {"Likes tea": ("person", False), "Plays chess badly": ("operator", True)}


def test_an_admin_writing_the_shared_notes_is_named(store: FileMemoryStore) -> None:
    from memory_core.file_memory.tool import MemoryRequest, MemoryTool

    tool = MemoryTool(store, ALICE, is_admin=True, origin=ME)
    tool.execute(MemoryRequest("memory", (Operation("add", content="Backups run nightly"),)))
    (change,) = store.history("memory")
    assert change.origin == Origin("admin", 7, by=ALICE)
    assert store.origins("memory")[0].origin.label() == "an admin"


def test_undo_the_latest_then_a_given_change(store: FileMemoryStore) -> None:
    add(store, "Likes tea")
    add(store, "Plays chess")
    store.apply("user", ALICE, [Operation("remove", old_text="tea")], ME)
    undone = store.undo("user", ALICE, None, ME)  # the removal: the entry is back
    assert undone.undone.id == 3 and store.read("user", ALICE).entries == (
        "Plays chess",
        "Likes tea",
    )
    store.undo("user", ALICE, 2, ME)  # the chess add: gone
    assert store.read("user", ALICE).entries == ("Likes tea",)
    assert [(c["action"], c["undoes"]) for c in history_lines(store)[-2:]] == [
        ("undo", 3),
        ("undo", 2),
    ]
    # the restored entry keeps its first writer
    assert store.origins("user", ALICE)[0].origin == ME
    with pytest.raises(UndoRefusedError, match=r"^Change 2 was already undone"):
        store.undo("user", ALICE, 2, ME)
    with pytest.raises(UndoRefusedError, match="itself an undo"):
        store.undo("user", ALICE, 4, ME)


def test_undo_is_refused_when_a_later_change_touched_the_entry(store: FileMemoryStore) -> None:
    add(store, "Likes tea")
    store.apply("user", ALICE, [Operation("replace", old_text="tea", content="Likes coffee")])
    before = store.path("user", ALICE).read_bytes()
    with pytest.raises(UndoRefusedError) as refused:
        store.undo("user", ALICE, 1, ME)
    assert str(refused.value) == (
        "Change 1 can't be undone: change 2 changed the same entry later (undo that one first)."
    )
    assert "\n" not in str(refused.value)
    assert store.path("user", ALICE).read_bytes() == before
    assert len(history_lines(store)) == 2  # a refusal records nothing
    store.undo("user", ALICE, 2, ME)  # once the later change is undone, the first can go
    store.undo("user", ALICE, 1, ME)
    assert store.read("user", ALICE).entries == ()


def test_undo_of_an_entry_changed_by_hand_is_refused(store: FileMemoryStore) -> None:
    add(store, "Likes tea")
    store.path("user", ALICE).write_text("Likes tea a lot\n")
    with pytest.raises(UndoRefusedError, match="no longer there"):
        store.undo("user", ALICE, None, ME)
    assert store.read("user", ALICE).entries == ("Likes tea a lot",)


def test_nothing_to_undo_for_a_person_without_history(store: FileMemoryStore) -> None:
    with pytest.raises(UndoRefusedError, match="no change left"):
        store.undo("user", BOB, None, ME)
    assert not store.path("user", BOB).parent.exists()  # a refusal creates no folder


def test_one_persons_history_never_shows_anothers(store: FileMemoryStore) -> None:
    add(store, "Alice keeps bees")
    add(store, "Bob sails", key=BOB)
    assert [c.after for c in store.history("user", BOB)] == ["Bob sails"]
    assert [c.after for c in store.history("user", ALICE)] == ["Alice keeps bees"]
    store.undo("user", BOB, None, ME)
    assert store.read("user", ALICE).entries == ("Alice keeps bees",)


def test_the_history_is_bounded_and_ids_keep_increasing(tmp_path: Path) -> None:
    path = tmp_path / "USER.history.jsonl"
    append_changes(path, [Draft("add", None, f"e{i}") for i in range(HISTORY_LIMIT)], ME)
    append_changes(path, [Draft("add", None, "within slack")], ME)
    assert len(read_changes(path)) == HISTORY_LIMIT + 1  # not rewritten at every change
    append_changes(path, [Draft("add", None, f"f{i}") for i in range(HISTORY_SLACK)], ME)
    kept = read_changes(path)
    assert len(kept) == HISTORY_LIMIT
    assert kept[-1].id == HISTORY_LIMIT + 1 + HISTORY_SLACK and kept[-1].after == "f99"
    assert [c.id for c in kept] == sorted({c.id for c in kept})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "USER.history.jsonl"
    append_changes(path, [Draft("add", None, "Likes tea")], ME)
    with path.open("a") as handle:
        handle.write('{"id": 2, "at": 1.0, "act')  # a writer killed mid-line
    assert [c.after for c in read_changes(path)] == ["Likes tea"]


def test_a_full_profile_archives_the_oldest_background_entries(store: FileMemoryStore) -> None:
    add(store, "m" * 60, ME)  # hers: never evicted
    add(store, "r" * 60, REVIEW)  # oldest background entry
    add(store, "e" * 60, Origin("extraction", 8))
    result = store.apply("user", ALICE, [Operation("add", content="n" * 60)], REVIEW)
    assert result.archived == ("r" * 60,)
    assert store.read("user", ALICE).entries == ("m" * 60, "e" * 60, "n" * 60)
    (archived,) = store.archived(ALICE)
    assert (archived.text, archived.origin) == ("r" * 60, REVIEW)
    archive = store.path("user", ALICE).with_name("USER.archive.jsonl")
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    changes = history_lines(store)[-2:]
    assert [(c["action"], c["before"]) for c in changes] == [
        ("archive", "r" * 60),
        ("add", None),
    ]
    assert archived.change_id == changes[0]["id"]


def test_an_archive_is_undoable(store: FileMemoryStore) -> None:
    add(store, "r" * 90, REVIEW)
    add(store, "e" * 90, REVIEW)
    store.apply("user", ALICE, [Operation("add", content="m" * 90)], ME)
    archive_id = next(c.id for c in store.history("user", ALICE) if c.action == "archive")
    store.apply("user", ALICE, [Operation("remove", old_text="mmm")], ME)  # room again
    store.undo("user", ALICE, archive_id, ME)
    assert "r" * 90 in store.read("user", ALICE).entries
    assert store.archived(ALICE) == []


def test_an_archive_that_no_longer_fits_is_refused_in_one_line_and_kept(
    store: FileMemoryStore,
) -> None:
    add(store, "r" * 90, REVIEW)
    add(store, "e" * 90, REVIEW)
    store.apply("user", ALICE, [Operation("add", content="m" * 90)], ME)
    archive_id = next(c.id for c in store.history("user", ALICE) if c.action == "archive")
    before = store.path("user", ALICE).read_bytes()
    with pytest.raises(UndoRefusedError) as refused:
        store.undo("user", ALICE, archive_id, ME)
    assert str(refused.value) == (
        f"Change {archive_id} can't be undone: it no longer fits (the memory would be at "
        "276/200 characters); remove an entry first."  # three entries of 90, two delimiters of 3
    )
    assert store.path("user", ALICE).read_bytes() == before
    assert [a.change_id for a in store.archived(ALICE)] == [archive_id]
    assert store.history("user", ALICE)[0].action == "add"  # no undo was recorded


def test_only_the_persons_own_entries_are_never_evicted(store: FileMemoryStore) -> None:
    add(store, "m" * 100, ME)
    add(store, "o" * 50, ME)
    before = store.path("user", ALICE).read_bytes()
    with pytest.raises(OverBudgetError):
        store.apply("user", ALICE, [Operation("add", content="n" * 60)], REVIEW)
    assert store.path("user", ALICE).read_bytes() == before
    assert store.archived(ALICE) == [] and len(history_lines(store)) == 2


def test_the_shared_notes_are_never_archived(tmp_path: Path) -> None:
    store = FileMemoryStore(tmp_path, memory_char_limit=100)
    store.apply("memory", None, [Operation("add", content="a" * 60)], OPERATOR)
    with pytest.raises(OverBudgetError):
        store.apply("memory", None, [Operation("add", content="b" * 60)], OPERATOR)


def test_erasing_a_person_erases_their_history_and_archive(store: FileMemoryStore) -> None:
    add(store, "r" * 90, REVIEW)
    add(store, "e" * 90, REVIEW)
    add(store, "m" * 90, ME)
    add(store, "Bob sails", key=BOB)
    folder = store.path("user", ALICE).parent
    assert (folder / "USER.history.jsonl").exists() and (folder / "USER.archive.jsonl").exists()
    store.erase_user(ALICE)
    assert not folder.exists()
    assert store.history("user", ALICE) == () and store.archived(ALICE) == []
    assert [c.after for c in store.history("user", BOB)] == ["Bob sails"]


def test_erasing_an_admin_drops_their_name_from_the_shared_audit(store: FileMemoryStore) -> None:
    store.apply(
        "memory", None, [Operation("add", content="Backups run nightly")], Origin("admin", 3, ALICE)
    )
    store.apply("memory", None, [Operation("add", content="VPN is down")], Origin("admin", 4, BOB))
    store.erase_user(ALICE)
    audit = store.path("memory").with_name("MEMORY.history.jsonl").read_text()
    assert ALICE not in audit and BOB in audit
    assert [c.origin for c in reversed(store.history("memory"))] == [
        Origin("admin", 3),
        Origin("admin", 4, BOB),
    ]
    assert store.read("memory").entries == ("Backups run nightly", "VPN is down")


def test_concurrent_writers_never_lose_or_reuse_a_history_line(tmp_path: Path) -> None:
    """Two writers on Alice's file (one also holding its lock between writes) and Bob's:
    every change is one line, ids strictly increase, and no line lands in the other file."""
    import threading

    from memory_core.file_memory.ledger import history_path

    def writer(key: str, prefix: str, count: int, slow: bool) -> None:
        store = FileMemoryStore(tmp_path)  # its own lock objects, like another process
        for i in range(count):
            if slow:  # also holds the lock in between, reading a record beside USER.md
                with store.person_record(key, "settings.json") as record:
                    record.read()
            store.apply("user", key, [Operation("add", content=f"{prefix} {i}")], ME)

    threads = [
        threading.Thread(target=writer, args=(ALICE, "alice-a", 25, True)),
        threading.Thread(target=writer, args=(ALICE, "alice-b", 25, False)),
        threading.Thread(target=writer, args=(BOB, "bob", 25, False)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=scaled(30))
    store = FileMemoryStore(tmp_path)
    alice = read_changes(history_path(store.path("user", ALICE)))
    bob = read_changes(history_path(store.path("user", BOB)))
    assert [c.id for c in alice] == list(range(1, 51))
    assert {c.after for c in alice} == set(store.read("user", ALICE).entries)
    assert all(c.after is not None and c.after.startswith("bob") for c in bob) and len(bob) == 25


def test_who_wrote_each_entry_is_kept_with_the_entries(store: FileMemoryStore) -> None:
    said = (Evidence(5, "I like tea"),)
    store.apply("user", ALICE, [Operation("add", content="Likes tea", evidence=said)], ME)
    add(store, "Plays chess", REVIEW)
    records = store.path("user", ALICE).with_name("USER.entries.json")
    assert stat.S_IMODE(records.stat().st_mode) == 0o600
    held = json.loads(records.read_text())["entries"]
    assert held["Likes tea"]["origin"] == ME.as_json()
    assert held["Likes tea"]["evidence"] == [{"message_id": 5, "span": "I like tea"}]
    assert held["Plays chess"]["origin"] == REVIEW.as_json()
    history = store.path("user", ALICE).with_name("USER.history.jsonl")
    history.write_text("")  # the history trimmed (or lost): the entries keep their writers
    assert [(o.origin, o.evidence) for o in store.origins("user", ALICE)] == [
        (ME, said),
        (REVIEW, ()),
    ]
    assert store.record_names(ALICE) == []  # not a person record
    with pytest.raises(MemoryFileError, match="invalid record name"):
        store.peek_record(ALICE, "USER.entries.json")


def test_a_folder_from_before_the_entries_file_falls_back_to_the_history(
    store: FileMemoryStore,
) -> None:
    add(store, "Likes tea")
    add(store, "Plays chess", REVIEW)
    records = store.path("user", ALICE).with_name("USER.entries.json")
    records.unlink()
    assert [o.origin for o in store.origins("user", ALICE)] == [ME, REVIEW]
    add(store, "Sails", OPERATOR)  # the next write keeps what the history told
    held = json.loads(records.read_text())["entries"]
    assert [held[t]["origin"]["kind"] for t in held] == ["person", "review", "operator"]


def test_erasing_an_admin_drops_their_name_from_the_shared_entries_too(
    store: FileMemoryStore,
) -> None:
    admin = Origin("admin", 3, ALICE)
    store.apply("memory", None, [Operation("add", content="Backups run nightly")], admin)
    records = store.path("memory").with_name("MEMORY.entries.json")
    assert ALICE in records.read_text()
    store.erase_user(ALICE)
    assert ALICE not in records.read_text()
    assert store.origins("memory")[0].origin == Origin("admin", 3)

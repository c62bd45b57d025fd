"""Person records, staged changes and settings on both memory stores, and the copy of a
file memory into PostgreSQL (`import_from`, checked by `content_digest`)."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core.errors import MemoryFileError, PersonErasedError
from memory_core.fence import ErasureFence, working
from memory_core.file_memory.backend import MemoryBackend
from memory_core.file_memory.edits import Operation
from memory_core.file_memory.origin import OPERATOR, Origin
from memory_core.file_memory.pending import PENDING_FILE, PendingChanges, Proposal
from memory_core.file_memory.settings import SETTINGS_FILE, PersonSettings, PersonSettingsStore
from memory_core.file_memory.store import FileMemoryStore
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.memory import PgMemoryStore
from memory_core.pg.memory_schema import MEMORY_MIGRATIONS

ALICE, BOB = "telegram-1001", "discord-2002"
PERSON = Origin("person", session_id=7)
REVIEW = Origin("review", session_id=8)
LIMITS = {"memory_char_limit": 120, "user_char_limit": 80}


@pytest.fixture
def pg_db(pg_database: str) -> Iterator[PgSyncDatabase]:
    with PgSyncDatabase(pg_database, max_size=4) as db:
        db.migrate(MEMORY_MIGRATIONS)
        yield db


def _pg(db: PgSyncDatabase) -> PgMemoryStore:
    return PgMemoryStore(db, fence=ErasureFence(), **LIMITS)  # type: ignore[arg-type]


def _files(home: Path) -> FileMemoryStore:
    return FileMemoryStore(home, **LIMITS)  # type: ignore[arg-type]


@pytest.fixture(params=["file", "pg"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryBackend:
    if request.param == "file":
        return _files(tmp_path)
    return _pg(request.getfixturevalue("pg_db"))


def test_both_stores_are_memory_backends(tmp_path: Path, pg_db: PgSyncDatabase) -> None:
    backends: list[MemoryBackend] = [_files(tmp_path), _pg(pg_db)]  # checked by mypy
    assert [b.user_keys() for b in backends] == [[], []]


def test_a_record_is_written_read_and_deleted_under_the_lock(store: MemoryBackend) -> None:
    assert store.peek_record(ALICE, "settings.json") is None
    with store.person_record(ALICE, "settings.json") as record:
        assert record.read() is None
        record.write('{"language": "nb"}\n')
        assert record.read() == '{"language": "nb"}\n'
    assert store.peek_record(ALICE, "settings.json") == '{"language": "nb"}\n'
    assert store.peek_record(BOB, "settings.json") is None
    assert store.record_names(ALICE) == ["settings.json"] and store.user_keys() == [ALICE]
    with store.person_record(ALICE, "settings.json") as record:
        record.delete()
        record.delete()  # nothing there: nothing happens
    assert store.peek_record(ALICE, "settings.json") is None and store.record_names(ALICE) == []
    for bad in ("USER.md", "USER.history.jsonl", "../x.json", ".hidden.json"):
        with pytest.raises(MemoryFileError, match="invalid record name"):
            store.peek_record(ALICE, bad)


def test_a_record_of_an_erased_person_is_refused_and_erased(store: MemoryBackend) -> None:
    with store.person_record(ALICE, PENDING_FILE) as record:
        record.write("{}")
    with working():
        store.fence.erasing(ALICE)
        with pytest.raises(PersonErasedError), store.person_record(ALICE, SETTINGS_FILE):
            pass
    assert store.erase_user(ALICE) is True
    assert store.peek_record(ALICE, PENDING_FILE) is None and store.user_keys() == []


def test_staged_changes_and_settings_work_the_same_on_both(store: MemoryBackend) -> None:
    pending = PendingChanges(store)
    staged = pending.stage(ALICE, [Proposal("add", "Alice likes tea", None, "waits")], REVIEW, "b")
    assert [c.id for c in pending.list(ALICE)] == [c.id for c in staged] == [1]
    decision = pending.approve(ALICE)
    assert [c.content for c in decision.applied] == ["Alice likes tea"]
    assert store.read("user", ALICE).entries == ("Alice likes tea",)
    assert store.history("user", ALICE)[0].origin == REVIEW and pending.list(ALICE) == ()
    settings = PersonSettingsStore(store)
    assert settings.update(ALICE, language="nb") == PersonSettings("nb")
    assert PersonSettingsStore(store).read(ALICE) == PersonSettings("nb")
    assert settings.update(ALICE, language=None).empty
    assert store.peek_record(ALICE, SETTINGS_FILE) is None  # no settings: no record


def test_on_files_the_records_are_the_files_of_before(tmp_path: Path) -> None:
    files = _files(tmp_path)
    PersonSettingsStore(files).update(ALICE, timezone="Europe/Oslo")
    PendingChanges(files).stage(ALICE, [Proposal("add", "x", None, "w")], REVIEW, "b")
    folder = files.path("user", ALICE).parent
    for name in (SETTINGS_FILE, PENDING_FILE):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    assert json.loads((folder / SETTINGS_FILE).read_text()) == {"timezone": "Europe/Oslo"}
    assert json.loads((folder / PENDING_FILE).read_text())["next_id"] == 1


def _fill(files: FileMemoryStore) -> None:
    """Two people and MEMORY.md: entries, an undo, an archived entry, pending, settings."""
    files.apply("memory", None, [Operation("add", content="House rule: be kind")], OPERATOR)
    files.apply("user", ALICE, [Operation("add", content="Review: Alice likes jazz")], REVIEW)
    files.apply("user", ALICE, [Operation("add", content="Alice said: I live in Oslo")], PERSON)
    files.apply("user", ALICE, [Operation("add", content="Alice: two cats, Ada + Bo")], PERSON)
    files.apply("user", ALICE, [Operation("add", content="Alice: tea")], PERSON)
    files.undo("user", ALICE)
    admin = Origin("admin", by=ALICE)
    files.apply("user", BOB, [Operation("add", content="Bob likes rain")], admin)
    PendingChanges(files).stage(BOB, [Proposal("add", "Bob hums", None, "waits")], REVIEW, "b")
    PersonSettingsStore(files).update(ALICE, language="nb", notices="off")


def _everything(store: MemoryBackend) -> list[object]:
    out: list[object] = [store.read("memory"), store.origins("memory")]
    out.append(store.history("memory", None, None))
    for key in store.user_keys():
        out += [key, store.read("user", key), store.origins("user", key)]
        out += [store.history("user", key, None), store.history("user", key, 2)]
        out += [store.archived(key), store.snapshot(key, True)]
        out += [(n, store.peek_record(key, n)) for n in store.record_names(key)]
    return out


def test_a_file_memory_imports_whole_with_the_same_digest(
    tmp_path: Path, pg_db: PgSyncDatabase
) -> None:
    files = _files(tmp_path)
    _fill(files)
    assert files.archived(ALICE) and any(c.action == "undo" for c in files.history("user", ALICE))
    pg = _pg(pg_db)
    empty = pg.content_digest()
    counts = pg.import_from(files)
    assert counts == {"people": 2, "entries": 4, "changes": 8, "archived": 1, "records": 2}
    assert pg.content_digest() == files.content_digest() != empty
    assert _everything(pg) == _everything(files)
    assert PendingChanges(pg).list(BOB) == PendingChanges(files).list(BOB)
    with pytest.raises(MemoryFileError, match="not empty"):
        pg.import_from(files)
    pg.apply("user", ALICE, [Operation("remove", old_text="Oslo")], PERSON)  # then they differ
    assert pg.content_digest() != files.content_digest()
    files.apply("user", ALICE, [Operation("remove", old_text="Oslo")], PERSON)
    for either in (pg, files):  # the imported ledger and archive undo as the files' do
        assert "Review: Alice likes jazz" in either.undo("user", ALICE, 3).write.state.entries
    assert _everything(pg)[3:5] == _everything(files)[3:5]

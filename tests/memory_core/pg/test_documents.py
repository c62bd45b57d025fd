"""`PgDocument`: a small document as one row that every replica reads and changes in turn."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import psycopg
import pytest

from memory_core import DocumentError
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.documents import DOCUMENT_MIGRATIONS, PgDocument
from tests.timing import scaled, wait_until_sync

NAME = "access.json"


@pytest.fixture
def db(pg_database: str) -> Iterator[PgSyncDatabase]:
    with PgSyncDatabase(pg_database, max_size=4) as database:
        database.migrate(DOCUMENT_MIGRATIONS)
        yield database


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll `condition` until it holds; fail after `scaled(timeout)` seconds."""
    wait_until_sync(condition, timeout, interval=0.01)


def waiting_on_a_lock(url: str) -> bool:
    """Whether some session of this database waits for a row lock on ``documents``."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query LIKE '%documents%'"
        ).fetchone()
    return row is not None and row[0] > 0


def append(document: PgDocument, line: str) -> None:
    with document.changing() as handle:
        handle.write((handle.read() or "") + line)


def test_a_document_is_none_until_written_and_its_signature_moves_with_each_write(
    db: PgSyncDatabase,
) -> None:
    document = PgDocument(db, NAME)
    assert document.label == "postgresql:documents/access.json"
    assert document.read() is None and document.signature() is None
    with document.changing() as handle:
        assert handle.read() is None  # the row is made, nothing written yet
    empty = document.signature()
    append(document, "alice\n")
    first = document.signature()
    append(document, "bob\n")
    assert len({empty, first, document.signature()}) == 3
    assert document.read() == "alice\nbob\n"
    assert PgDocument(db, "other").read() is None  # one row per name


@pytest.mark.parametrize("before", [None, "carol\n"], ids=["first-writes", "a-later-change"])
def test_a_change_waits_for_a_slow_one_and_keeps_what_it_wrote(
    db: PgSyncDatabase, pg_database: str, before: str | None
) -> None:
    """Alice's replica holds the row (new, or written before) while Bob's starts his
    change: Bob's waits, then reads Alice's line and adds his own; nothing is lost."""
    slow, fast = PgDocument(db, NAME), PgDocument(db, NAME)
    if before is not None:
        append(slow, before)
    holding, release = threading.Event(), threading.Event()

    def alice() -> None:
        with slow.changing() as handle:
            text = handle.read()
            holding.set()  # slow between reading and writing
            release.wait(scaled(10))
            handle.write((text or "") + "alice\n")

    first = threading.Thread(target=alice)
    first.start()
    assert holding.wait(scaled(10))
    second = threading.Thread(target=append, args=(fast, "bob\n"))
    second.start()
    wait_for(lambda: waiting_on_a_lock(pg_database))
    release.set()
    first.join(scaled(10))
    second.join(scaled(10))
    assert fast.read() == (before or "") + "alice\nbob\n"


def test_a_change_held_past_the_timeout_is_refused_in_one_line(db: PgSyncDatabase) -> None:
    hostile, patient = PgDocument(db, NAME), PgDocument(db, NAME, lock_timeout=0.2)
    append(hostile, "alice\n")
    locked = r"^postgresql:documents/access\.json is locked by another process"
    with hostile.changing(), pytest.raises(DocumentError, match=locked):  # never lets go
        append(patient, "bob\n")
    append(patient, "bob\n")  # free again: the refused change left nothing behind
    assert patient.read() == "alice\nbob\n"

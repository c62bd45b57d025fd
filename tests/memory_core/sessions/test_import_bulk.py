"""Imports at bulk speed: FTS5 settings only inside a chunk, merges after, parsing in a process."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memory_core.errors import ImportFormatError
from memory_core.sessions.connection import transaction
from memory_core.sessions.db import SessionDB
from memory_core.sessions.importer import BULK_FTS, fts_settings
from memory_core.sessions.models import SearchScope
from tests.memory_core.sessions.test_import_staging import (
    PausedLines,
    line,
    run_in_thread,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[3]
INDEXES = ("messages_fts", "messages_trigram")


def settings(path: Path) -> dict[str, list[tuple[str, object]]]:
    """Each index's stored configuration, read from another connection."""
    conn = sqlite3.connect(path)
    try:
        return {
            i: conn.execute(f"SELECT k, v FROM {i}_config ORDER BY k").fetchall() for i in INDEXES
        }
    finally:
        conn.close()


def test_bulk_settings_hold_inside_the_transaction_only(tmp_path: Path) -> None:
    with SessionDB(tmp_path / "state.db") as db:
        conn = db.conn
        conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('automerge', 8)")
        before = settings(db.path)
        with transaction(conn), fts_settings(conn, BULK_FTS):
            inside = dict(conn.execute("SELECT k, v FROM messages_fts_config").fetchall())
            assert (inside["automerge"], inside["hashsize"]) == (0, 64 << 20)
        assert settings(db.path) == before  # 8 back, hashsize unset again
        with pytest.raises(RuntimeError), transaction(conn), fts_settings(conn, BULK_FTS):
            raise RuntimeError("a chunk fails")
        assert settings(db.path) == before


def test_an_import_and_a_failed_one_leave_the_index_settings_as_they_were(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        db.conn.execute(
            "INSERT INTO messages_trigram(messages_trigram, rank) VALUES ('automerge', 2)"
        )
        before = settings(path)
        db.import_lines([line(n) for n in range(1200)], chunk_rows=300)
        assert settings(path) == before
        with pytest.raises(ImportFormatError, match=r"^line 1201: "):
            db.import_lines([line(n, session="other") for n in range(1200)] + ["{"], chunk_rows=300)
        assert settings(path) == before
        assert len(db.search("ferry", SearchScope("telegram-1"))) > 0
        db.check()


def test_between_chunks_other_connections_see_the_settings_unchanged(tmp_path: Path) -> None:
    """What a crash would leave: a committed chunk, with the indexes' settings untouched."""
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        before = settings(path)
        lines = PausedLines([line(n) for n in range(5000)], [line(5000)])
        thread, out = run_in_thread(lambda: db.import_lines(lines, chunk_rows=1000))
        conn = sqlite3.connect(path)
        try:
            wait_for(lambda: conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 5000)
            assert settings(path) == before
            for index in INDEXES:  # the staged rows are indexed, in step with their table
                conn.execute(f"INSERT INTO {index}({index}, rank) VALUES ('integrity-check', 1)")
        finally:
            conn.close()
            lines.release.set()
            thread.join(30)
        assert out[0].messages_inserted == 5001  # type: ignore[attr-defined]
        db.check()


CHILD = """
import os, sys, threading
from pathlib import Path
from memory_core.errors import ImportFormatError
from memory_core.sessions.db import SessionDB
assert threading.active_count() == 1
with SessionDB(Path(sys.argv[1])) as db:
    count = "SELECT count(*) FROM messages"
    for name in sys.argv[2:]:
        with open(name, "rb") as lines:
            try:
                db.import_lines(lines)
            except ImportFormatError as exc:
                print("refused", exc.line, db.conn.execute(count).fetchone()[0])
            else:
                print("imported", db.conn.execute(count).fetchone()[0])
times = os.times()
print("child cpu", times.children_user + times.children_system > 0)
"""


def test_a_large_file_is_parsed_in_another_process(tmp_path: Path) -> None:
    """A file over a MiB is parsed by a forked process (its CPU time is a child's)."""
    rows = [line(n, content=f"{'ferry ' * 600}{n}") for n in range(1500)]
    bad, good = tmp_path / "bad.jsonl", tmp_path / "good.jsonl"
    bad.write_text("\n".join([*rows, '{"session": 1}']) + "\n")
    good.write_text("\n".join(rows) + "\n")
    assert good.stat().st_size > 1 << 20
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "state.db"), str(bad), str(good)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert done.stdout.splitlines() == ["refused 1501 0", "imported 1500", "child cpu True"]


def test_a_file_parsed_in_a_thread_when_other_threads_run(tmp_path: Path) -> None:
    """Forking a process that runs threads risks a lock held at the fork: a thread parses."""
    file = tmp_path / "big.jsonl"
    file.write_text("\n".join(line(n, content="kayak " * 400) for n in range(600)) + "\n")
    assert file.stat().st_size > 1 << 20
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    before = os.times()
    try:
        with SessionDB(tmp_path / "state.db") as db, file.open("rb") as lines:
            assert db.import_lines(lines).messages_inserted == 600
    finally:
        stop.set()
        other.join()
    after = os.times()
    assert (
        after.children_user + after.children_system == before.children_user + before.children_system
    )

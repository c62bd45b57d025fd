"""Imports at bulk speed: parsing in a forked process for large files, a larger page cache."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memory_core.errors import ImportFormatError
from memory_core.sessions.db import SessionDB
from memory_core.sessions.importer import IMPORT_CACHE_KIB
from tests.memory_core.sessions.test_import_staging import line
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[3]


def test_the_import_connection_gets_its_page_cache_back(tmp_path: Path) -> None:
    """The import reads with a 64 MiB cache, then the connection is as it was, failed or not."""
    with SessionDB(tmp_path / "state.db") as db:
        db.conn.execute("PRAGMA cache_size = -3000")
        seen: list[int] = []
        db.import_lines(
            [line(n) for n in range(20)],
            progress=lambda _n: seen.append(db.conn.execute("PRAGMA cache_size").fetchone()[0]),
        )
        assert seen == [-IMPORT_CACHE_KIB]
        assert db.conn.execute("PRAGMA cache_size").fetchone()[0] == -3000
        with pytest.raises(ImportFormatError):
            db.import_lines([line(1), "{"])
        assert db.conn.execute("PRAGMA cache_size").fetchone()[0] == -3000


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
        cwd=ROOT, capture_output=True, text=True, timeout=scaled(120), check=True,
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

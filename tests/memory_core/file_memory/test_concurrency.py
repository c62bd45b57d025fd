"""Real processes: concurrent writers lose nothing; SIGKILL never leaves a torn file."""

from __future__ import annotations

import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_core.file_memory.edits import Operation
from memory_core.file_memory.store import FileMemoryStore
from tests.memory_core.file_memory.worker_process import BIG_BUDGET, crash_entry, loop_signalling
from tests.timing import scaled

pytestmark = pytest.mark.slow  # both tests are real-process rounds of many seconds

ROOT = Path(__file__).resolve().parents[3]
KEY = "telegram-777"
CRASH_ENTRY = re.compile(r"crash (\d+) (x*) end")


def _worker(*args: object, **kwargs: object) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.memory_core.file_memory.worker_process", *map(str, args)],
        cwd=ROOT,
        **kwargs,  # type: ignore[arg-type]
    )


def test_four_processes_adding_100_entries_each_lose_nothing(tmp_path: Path) -> None:
    workers = [_worker("add", tmp_path, KEY, f"p{n}", 100) for n in range(4)]
    assert [w.wait(timeout=scaled(60)) for w in workers] == [0, 0, 0, 0]
    store = FileMemoryStore(tmp_path, user_char_limit=BIG_BUDGET)
    text = store.path("user", KEY).read_text()
    entries = store.read("user", KEY).entries
    expected = {f"p{n} entry {i}" for n in range(4) for i in range(100)}
    assert len(entries) == 400 and set(entries) == expected  # all present, no duplicates
    assert text.count("\n§\n") == 399 and text.endswith("\n")  # not torn
    for n in range(4):  # each process's own entries stay in its order
        mine = [e for e in entries if e.startswith(f"p{n} ")]
        assert mine == [f"p{n} entry {i}" for i in range(100)]


@pytest.mark.timeout(240)  # 25 child processes: about 15 s alone, far more on a busy machine
def test_sigkill_at_random_moments_never_tears_the_file(tmp_path: Path) -> None:
    # A forkserver with the store preloaded makes each of the 25 children cheap.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        ["memory_core.file_memory.store", "tests.memory_core.file_memory.worker_process"]
    )
    rng = random.Random(20240531)
    store = FileMemoryStore(tmp_path, user_char_limit=BIG_BUDGET)
    path = store.path("user", KEY)
    seen: set[int] = set()
    for run in range(25):
        start = run * 100_000
        ours, theirs = ctx.Pipe(duplex=False)
        child = ctx.Process(target=loop_signalling, args=(str(tmp_path), KEY, start, theirs))
        child.start()
        assert ours.poll(30) and ours.recv() == "ready"
        time.sleep(rng.uniform(0.005, 0.05))  # the random moment of death, not a wait
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
        child.join(scaled(10))
        assert child.exitcode == -signal.SIGKILL
        entries = store.read("user", KEY).entries  # parses
        assert entries, "the file lost its content"
        for entry in entries:
            match = CRASH_ENTRY.fullmatch(entry)
            assert match, f"torn entry {entry!r}"
            n = int(match.group(1))
            assert len(match.group(2)) == n % 40, f"torn entry {entry!r}"
            assert n >= start or n in seen  # older entries are ones read whole before
            seen.add(n)
        assert path.read_text().endswith(" end\n")
    # The next ordinary write clears any temp file a killed writer left behind.
    store.apply("user", KEY, [Operation("add", content=crash_entry(1))])
    assert list(path.parent.glob(".USER.md.*.tmp")) == []

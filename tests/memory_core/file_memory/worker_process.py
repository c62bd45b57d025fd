"""A child process for the multi-process and crash tests (run with -m).

    python -m tests.memory_core.file_memory.worker_process add HOME KEY PREFIX COUNT
    python -m tests.memory_core.file_memory.worker_process loop HOME KEY START

`add` adds COUNT distinct entries; `loop` writes forever (adding, and removing
the oldest entry to keep the file small), printing "ready" after its first write.
Entries written by `loop` have the form "crash N xxx… end" with N % 40 x's, so
a torn entry is recognisable.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from memory_core.file_memory.edits import Operation
from memory_core.file_memory.store import FileMemoryStore
from tests.timing import scaled

BIG_BUDGET = 1_000_000


def crash_entry(n: int) -> str:
    return f"crash {n} {'x' * (n % 40)} end"


def _print_ready() -> None:
    print("ready", flush=True)


def loop_signalling(home: str, key: str, start: int, ready: Connection) -> None:
    """`loop` for a multiprocessing child: reports readiness through a pipe."""
    loop(home, key, start, lambda: ready.send("ready"))


def _store(home: str) -> FileMemoryStore:
    return FileMemoryStore(Path(home), user_char_limit=BIG_BUDGET, lock_timeout=scaled(30))


def add(home: str, key: str, prefix: str, count: int) -> None:
    store = _store(home)
    for i in range(count):
        store.apply("user", key, [Operation("add", content=f"{prefix} entry {i}")])


def loop(home: str, key: str, start: int, ready: Callable[[], None] = _print_ready) -> None:
    store = _store(home)
    n = start
    while True:
        ops = [Operation("add", content=crash_entry(n))]
        current = store.read("user", key).entries
        if len(current) >= 30:  # keep about 30 entries: rewrite, not only append
            ops.append(Operation("remove", old_text=current[0]))
        store.apply("user", key, ops)
        if n == start:
            ready()
        n += 1


if __name__ == "__main__":
    command, home, key, *rest = sys.argv[1:]
    if command == "add":
        add(home, key, rest[0], int(rest[1]))
    elif command == "loop":
        loop(home, key, int(rest[0]))
    else:
        raise SystemExit(f"unknown command {command!r}")

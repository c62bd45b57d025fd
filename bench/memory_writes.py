"""Benchmark: memory tool writes to one USER.md from 1, 2 and 4 processes.

Each process adds distinct entries to the same file through `FileMemoryStore`
(lock, re-read, drift check, safety scan, temp file, fsync, atomic replace).
Prints the aggregate writes per second and the p50/p95 latency of one write.

    .venv/bin/python bench/memory_writes.py [--writes 200] [--processes 1,2,4] [--dir PATH]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from multiprocessing.synchronize import Barrier
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import describe

from memory_core.file_memory import FileMemoryStore, Operation

KEY = "telegram-1"
BUDGET = 10_000_000  # raised so every write fits; the default is 1,375


def _writer(
    home: str, worker: int, writes: int, barrier: Barrier, out: multiprocessing.Queue
) -> None:
    store = FileMemoryStore(Path(home), user_char_limit=BUDGET, lock_timeout=60)
    latencies = []
    barrier.wait()
    for i in range(writes):
        op = Operation("add", content=f"Worker {worker} noted fact number {i} about the user")
        start = time.perf_counter()
        store.apply("user", KEY, [op])
        latencies.append(time.perf_counter() - start)
    out.put(latencies)


def run(processes: int, writes: int, base: Path) -> tuple[float, float, float, float, int]:
    """Writes per second, p50, p95 and max latency in ms, and the final file size."""
    ctx = multiprocessing.get_context("spawn")
    home = Path(tempfile.mkdtemp(prefix=f"bench-{processes}p-", dir=base))
    barrier = ctx.Barrier(processes + 1)
    out = ctx.Queue()
    workers = [
        ctx.Process(target=_writer, args=(str(home), n, writes, barrier, out))
        for n in range(processes)
    ]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    latencies = [lat for _ in workers for lat in out.get()]
    elapsed = time.perf_counter() - start
    for w in workers:
        w.join()
    size = FileMemoryStore(home, user_char_limit=BUDGET).path("user", KEY).stat().st_size
    cuts = statistics.quantiles(latencies, n=100)
    return len(latencies) / elapsed, cuts[49] * 1000, cuts[94] * 1000, max(latencies) * 1000, size


def main() -> None:
    print(describe())
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=200, help="writes per process")
    parser.add_argument("--processes", default="1,2,4", help="comma-separated process counts")
    parser.add_argument("--dir", type=Path, default=None, help="folder for the test files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as base:
        print(f"{args.writes} writes per process, one USER.md, files in {base}")
        print(
            f"{'processes':>9} {'writes/s':>9} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}"
            f" {'final file':>11}"
        )
        for count in (int(p) for p in args.processes.split(",")):
            rate, p50, p95, worst, size = run(count, args.writes, Path(base))
            print(f"{count:>9} {rate:>9.0f} {p50:>8.2f} {p95:>8.2f} {worst:>8.1f} {size:>9,} B")


if __name__ == "__main__":
    main()

"""Benchmark: the words of a message for PostgreSQL (`search_text`), before and after.

The messages are bench/import.py's corpus (deterministic for a `--seed`). Each
checkout's `memory_core.pg.search_text` is timed in a fresh process of its own
(the current tree, and `--before`, a git revision exported to a temporary
directory), the two alternating `--repeat` times. Each process measures its
own CPU time (a shared machine's load moves wall time less so) for:

- batch, cold: `index_documents` over the first `--batch` messages, the first call
  of the process (what an import's first chunk costs);
- batch, warm: the same over the next batches (an import's other chunks);
- single: `index_document` for each of `--single` messages, one call each (a turn
  storing its messages).

The literals of both checkouts are compared (their sha256 printed) before the figures.

    .venv/bin/python bench/tokens_speed.py [--messages 30000] [--before a5c9763] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import datetime
from io import BytesIO
from pathlib import Path

from machine import describe, load_average

ROOT = Path(__file__).resolve().parent.parent
BEFORE = "a5c9763"  # the commit before issue 38's tokenizer


def rows_of(file: Path) -> list[tuple[str, str, float, str | None]]:
    rows = []
    with file.open("rb") as lines:
        for raw in lines:
            r = json.loads(raw)
            ts = datetime.fromisoformat(r["timestamp"]).timestamp()
            rows.append((r["role"], r["content"], ts, r.get("name")))
    return rows


def measure(file: Path, batch: int, single: int) -> dict[str, object]:
    """In this process: µs of CPU per message for each way, and the literals' digest.

    `search_text` is no public API of memory_core (tests/test_architecture.py keeps
    benches to it): this bench times that one internal module on purpose, by name,
    and says so here rather than going through a store's round trips."""
    search_text = importlib.import_module("memory_core.pg.search_text")
    index_document, index_documents = search_text.index_document, search_text.index_documents

    rows = rows_of(file)
    clock = time.process_time
    started = clock()
    literals = index_documents(rows[:batch])
    cold = (clock() - started) / batch
    started = clock()
    for n in range(batch, len(rows), batch):
        literals += index_documents(rows[n : n + batch])
    warm = (clock() - started) / max(1, len(rows) - batch)
    picked = rows[:: max(1, len(rows) // single)][:single]
    started = clock()
    for row in picked:
        index_document(*row)
    one = (clock() - started) / len(picked)
    digest = hashlib.sha256(json.dumps(literals).encode()).hexdigest()[:16]
    return {"cold": cold * 1e6, "warm": warm * 1e6, "single": one * 1e6, "digest": digest}


def run(tree: Path, file: Path, batch: int, single: int) -> dict[str, object]:
    """`measure` in a fresh process importing `memory_core` from `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(file), str(batch), str(single)],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def export(revision: str, into: Path) -> Path:
    """`memory_core` as of `revision`, written under `into`."""
    data = subprocess.run(
        ["git", "archive", "--format=tar", revision, "memory_core"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--batch", type=int, default=10_000, help="messages per call (an import's chunk)"
    )
    parser.add_argument(
        "--single", type=int, default=2_000, help="messages tokenized one call each"
    )
    parser.add_argument("--before", default=BEFORE, help="the git revision to compare with")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, alternating")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(Path(args.child[0]), int(args.child[1]), int(args.child[2]))))
        return
    print(describe(), flush=True)
    corpus = importlib.import_module("import")  # bench/import.py: its corpus
    with tempfile.TemporaryDirectory(prefix="bench-tokenize-") as tmp:
        base = Path(tmp)
        file = base / "history.jsonl"
        corpus.write_corpus(file, args.messages, args.seed)
        trees = {"before": export(args.before, base / "before"), "after": ROOT}
        print(f"{args.messages:,} messages (seed {args.seed}), batches of {args.batch:,}, "
              f"{args.single:,} single calls; before {args.before}, after: this tree")  # fmt: skip
        figures: dict[str, list[dict[str, object]]] = {"before": [], "after": []}
        for n in range(1, args.repeat + 1):
            for name, tree in trees.items():
                figures[name].append(run(tree, file, args.batch, args.single))
            print(f"run {n}: load average {load_average()}", flush=True)
        digests = {name: {str(f["digest"]) for f in runs} for name, runs in figures.items()}
        same = "the same" if digests["before"] == digests["after"] else "DIFFERENT"
        print(f"literals: {same} (sha256 before {sorted(digests['before'])}, "
              f"after {sorted(digests['after'])})")  # fmt: skip
        print(f"µs of CPU per message{'':14}{'before':>22}{'after':>22}   median ratio")
        for key, label in (("cold", "batch, first call"), ("warm", "batch, later calls"),
                           ("single", "one message a call")):  # fmt: skip
            cells = []
            for name in ("before", "after"):
                values = [float(str(f[key])) for f in figures[name]]
                cells.append(
                    f"{statistics.median(values):7.1f} ({min(values):.1f}-{max(values):.1f})"
                )
            ratio = statistics.median(
                float(str(f[key])) for f in figures["before"]
            ) / statistics.median(float(str(f[key])) for f in figures["after"])
            print(f"  {label:<33}{cells[0]:>22}{cells[1]:>22}   {ratio:.2f}x faster")


if __name__ == "__main__":
    main()

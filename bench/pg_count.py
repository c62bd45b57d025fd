"""What a bench sends to PostgreSQL, and what the server spends on it.

`StatementCounter` wraps psycopg's async cursor `execute`/`executemany`, the
connection's internal commands (BEGIN, COMMIT, ROLLBACK, SAVEPOINT) and its
`pipeline()` blocks, for the whole process while it is installed: statements by
kind (the statement's first words, its text collapsed), round trips (a
statement outside a pipeline waits for its answer: one each; a pipeline block
sends its statements together: one for the block) and the rows the answered
statements returned or touched. It changes nothing the statements do.

`ServerCpu` sums the CPU time (user + system) of a PostgreSQL server's
processes from /proc: the postmaster with its reaped children, and every live
child (backends, walwriter, checkpointer...). Linux only; on another system,
or when /proc cannot be read, it says so (None).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
from psycopg import AsyncConnection, AsyncCursor

_SPACE = re.compile(r"\s+")
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def kind(query: object) -> str:
    """A statement's kind: its text, whitespace collapsed, cut to 90 characters."""
    if isinstance(query, bytes):
        text = query.decode(errors="replace")
    elif isinstance(query, str):
        text = query
    else:
        text = getattr(query, "_obj", None) or type(query).__name__
        text = text if isinstance(text, str) else repr(text)
    return _SPACE.sub(" ", text).strip()[:90]


class StatementCounter:
    """Counts statements by kind, round trips and rows while installed (`install`)."""

    def __init__(self) -> None:
        self.statements: Counter[str] = Counter()
        self.round_trips = 0
        self.rows = 0
        self._undo: list[Callable[[], None]] = []

    def reset(self) -> None:
        self.statements.clear()
        self.round_trips = 0
        self.rows = 0

    def install(self) -> None:
        counter = self
        execute = AsyncCursor.execute
        executemany = AsyncCursor.executemany
        exec_command = AsyncConnection._exec_command
        pipeline = AsyncConnection.pipeline

        async def counted_execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
            piped = self._conn._pipeline is not None
            counter.statements[kind(query)] += 1
            counter.round_trips += 0 if piped else 1
            result = await execute(self, query, params, **kw)
            if not piped and self.rowcount > 0:
                counter.rows += self.rowcount
            return result

        async def counted_many(self: Any, query: Any, params_seq: Any, **kw: Any) -> Any:
            piped = self._conn._pipeline is not None
            counter.statements[kind(query) + " (executemany)"] += 1
            counter.round_trips += 0 if piped else 1
            return await executemany(self, query, params_seq, **kw)

        def counted_command(self: Any, command: Any, *args: Any, **kw: Any) -> Any:
            counter.statements[kind(command)] += 1
            counter.round_trips += 0 if self._pipeline is not None else 1
            return exec_command(self, command, *args, **kw)

        @contextlib.asynccontextmanager
        async def counted_pipeline(self: Any) -> AsyncIterator[Any]:
            outer = self._pipeline is None
            async with pipeline(self) as piped:
                yield piped
            if outer:
                counter.round_trips += 1

        AsyncCursor.execute = counted_execute  # type: ignore[method-assign]
        AsyncCursor.executemany = counted_many  # type: ignore[method-assign]
        AsyncConnection._exec_command = counted_command  # type: ignore[method-assign]
        AsyncConnection.pipeline = counted_pipeline  # type: ignore[method-assign,assignment]

        def undo() -> None:
            AsyncCursor.execute = execute  # type: ignore[method-assign]
            AsyncCursor.executemany = executemany  # type: ignore[method-assign]
            AsyncConnection._exec_command = exec_command  # type: ignore[method-assign]
            AsyncConnection.pipeline = pipeline  # type: ignore[method-assign]

        self._undo.append(undo)

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def print_per_turn(self, turns: int, indent: str = "  ") -> None:
        """Statements, round trips and rows per turn, then each kind's count per turn."""
        total = sum(self.statements.values())
        print(f"{indent}per turn: {total / turns:5.1f} statements, "
              f"{self.round_trips / turns:5.1f} round trips, {self.rows / turns:6.1f} rows "
              f"(over {turns} turns)")  # fmt: skip
        for text, n in self.statements.most_common():
            print(f"{indent}  {n / turns:5.2f}  {text}")


class ServerCpu:
    """CPU seconds used by the PostgreSQL server at `url` (all its processes)."""

    def __init__(self, url: str) -> None:
        with psycopg.connect(url) as conn:  # the backend's parent read while it lives
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            found = _stat(int(row[0])) if row else None
        self.postmaster = found[1] if found else None

    def seconds(self) -> float | None:
        if self.postmaster is None:
            return None
        own = _stat(self.postmaster)
        if own is None:
            return None
        total = own[2] + own[3]  # its own time and its reaped children's
        for name in os.listdir("/proc"):
            if name.isdigit():
                found = _stat(int(name))
                if found is not None and found[1] == self.postmaster:
                    total += found[2]
        return total / _TICK


def _stat(pid: int) -> tuple[int, int, int, int] | None:
    """(pid, parent pid, utime + stime, cutime + cstime) in ticks, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            raw = file.read().decode(errors="replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    # fields[0] is the state (field 3); ppid is field 4; utime..cstime are 14..17
    return pid, int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])

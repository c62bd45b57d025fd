"""Stopping a read when its caller gives up or its time runs out.

A search runs on a reader thread while the caller awaits it. When the caller
stops waiting (its task is cancelled, e.g. by a prefetch timeout), the query
must not go on holding the thread: `ReadCall.cancel` interrupts the
connection (`sqlite3_interrupt`) while the call runs on it, and the call's
progress handler refuses to go on once it is cancelled or past its deadline,
so a statement started later stops too. The lock makes sure an interrupt
only ever lands on the connection while this call holds it, never on the
next call that thread runs.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError
from contextlib import contextmanager

from memory_core.errors import ReadTimeoutError

PROGRESS_STEPS = 1000  # SQLite VM instructions between two checks


class ReadCall:
    """One read on a reader connection: whether its caller gave up, and its deadline."""

    def __init__(self, limit: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self._clock = clock
        self._deadline = None if limit is None else clock() + limit
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self.cancelled = False
        self.timed_out = False

    def cancel(self) -> None:
        """The caller gave up: stop the read now if it is running, or before it starts."""
        with self._lock:
            self.cancelled = True
            if self._conn is not None:
                self._conn.interrupt()

    def _should_stop(self) -> int:
        if self.cancelled:
            return 1
        if self._deadline is not None and self._clock() >= self._deadline:
            self.timed_out = True
            return 1
        return 0

    @contextmanager
    def running_on(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        """Run the read on `conn` under this call's cancel flag and deadline.

        A read stopped for its deadline raises `ReadTimeoutError`.
        """
        with self._lock:
            if self.cancelled:  # nobody waits for the result any more
                raise CancelledError
            self._conn = conn
        conn.set_progress_handler(self._should_stop, PROGRESS_STEPS)
        try:
            yield conn
        except sqlite3.OperationalError:
            if self.timed_out and not self.cancelled:
                raise ReadTimeoutError(
                    f"reading state.db took over {self.limit:g} s and was stopped"
                ) from None
            raise
        finally:
            with self._lock:
                self._conn = None
            conn.set_progress_handler(None, 0)

    @property
    def stopped(self) -> bool:
        return self.cancelled or self.timed_out


def usable(conn: sqlite3.Connection) -> bool:
    """Whether `conn` still answers a query (after an interrupt it should)."""
    try:
        conn.execute("SELECT 1").fetchone()
    except sqlite3.Error:
        return False
    return True

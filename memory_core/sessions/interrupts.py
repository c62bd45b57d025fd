"""Stopping a read when its caller gives up or its time runs out.

A search runs on a reader thread while the caller awaits it. When the caller
stops waiting (its task is cancelled, e.g. by a prefetch timeout) or the
store's time limit for a read passes, the query must not go on holding the
thread: `ReadCall.stop` interrupts the connection (`sqlite3_interrupt`)
while the call runs on it, and every statement the call starts after that
is interrupted as it starts (from the connection's trace callback, which
SQLite calls at the start of each statement), so a stop that falls between
two statements is not lost. The lock makes sure an interrupt only ever
lands on the connection while this call holds it, never on the next call
that thread runs. The progress handler is left free for `on_connect` hooks.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import CancelledError
from contextlib import contextmanager

from memory_core.errors import ReadTimeoutError


class ReadCall:
    """One read on a reader connection: whether it was stopped, and why."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self.cancelled = False  # the caller stopped waiting
        self.timed_out = False  # the read ran past `limit`

    @property
    def stopped(self) -> bool:
        return self.cancelled or self.timed_out

    def cancel(self) -> None:
        """The caller gave up: stop the read now if it runs, or before it starts."""
        self._stop("cancelled")

    def expire(self) -> None:
        """The read's time is up: stop it, and have it raise `ReadTimeoutError`."""
        self._stop("timed_out")

    def _stop(self, reason: str) -> None:
        with self._lock:
            if not self.stopped:
                setattr(self, reason, True)
            if self._conn is not None:
                self._conn.interrupt()

    def _on_statement(self, _sql: str) -> None:
        if self.stopped and self._conn is not None:  # on the reader thread, under the call
            self._conn.interrupt()

    @contextmanager
    def running_on(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        """Run the read on `conn`, stoppable until it ends.

        A read stopped for its time limit raises `ReadTimeoutError`; one its
        caller gave up on raises whatever SQLite raised (nobody sees it).
        """
        with self._lock:
            if self.cancelled:  # nobody waits for the result any more
                raise CancelledError
            if self.timed_out:
                raise self._timeout_error()
            self._conn = conn
        conn.set_trace_callback(self._on_statement)
        try:
            yield conn
        except sqlite3.OperationalError:
            if self.timed_out:
                raise self._timeout_error() from None
            raise
        finally:
            with self._lock:
                self._conn = None
            conn.set_trace_callback(None)

    def _timeout_error(self) -> ReadTimeoutError:
        return ReadTimeoutError(f"reading state.db took over {self.limit:g} s and was stopped")


def usable(conn: sqlite3.Connection) -> bool:
    """Whether `conn` still answers a query (after an interrupt it should)."""
    try:
        conn.execute("SELECT 1").fetchone()
    except sqlite3.Error:
        return False
    return True

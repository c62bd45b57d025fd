"""The async store's writer: one thread, one connection, writes in arrival order, never dropped.

Every write is a job in one FIFO queue, run by one thread that owns the only
writing connection, so writes reach state.db in the order they were made
(a message is never stored after a later message or a later end of its
session). A job that finds the database locked (an operator import,
another process) is retried with backoff, its place at the head of the queue
kept, until it succeeds or the writer closes; other errors fail the job
at once. Jobs are whole transactions, so a retry never writes anything twice.

Callers wait for their job only so long (`SessionStore`'s `wait_timeout`);
the job stays queued and is written when the lock frees. `close()` waits up
to its flush timeout for queued jobs, then gives up on the rest and says how
many were lost; a process that is killed loses whatever was still queued
(only writes that already waited past their caller's bound can be there).
"""

from __future__ import annotations

import collections
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from memory_core.errors import SessionStoreError
from memory_core.sessions.connection import is_busy

log = logging.getLogger(__name__)

Job = Callable[[sqlite3.Connection], Any]


@dataclass(frozen=True)
class Backoff:
    """How a write that met a locked database is retried: doubling pauses up to a cap."""

    first: float = 0.05
    most: float = 1.0

    def pause(self, attempt: int) -> float:
        return float(min(self.most, self.first * (2 ** min(attempt, 20))))


@dataclass(frozen=True)
class WritePolicy:
    """How the async store's writes wait for a locked database.

    `busy_timeout`: how long one attempt waits for the lock (SQLite's busy
    handler) before the writer backs off and tries again. `wait_timeout`: how
    long a caller waits for its write before `SessionStoreBusyError` (the
    write stays queued). `flush_timeout`: how long closing waits for queued
    writes before giving up on them.
    """

    busy_timeout: float = 1.0
    wait_timeout: float = 5.0
    flush_timeout: float = 10.0
    backoff: Backoff = Backoff()


DEFAULT_WRITE_POLICY = WritePolicy()


@dataclass
class _Queued:
    job: Job
    future: Future[Any]
    messages: int


class RetryingWriter:
    """Runs write jobs on one thread, in order, retrying while the database is busy."""

    def __init__(self, opener: Callable[[], sqlite3.Connection], backoff: Backoff) -> None:
        self._opener = opener
        self._backoff = backoff
        self._queue: collections.deque[_Queued] = collections.deque()
        self._cond = threading.Condition()
        self._closing = False
        self._abandon = threading.Event()
        self._thread: threading.Thread | None = None
        self._opened: Future[None] = Future()

    def start(self) -> Future[None]:
        """Start the thread; the future resolves once the connection is open (or failed)."""
        self._thread = threading.Thread(target=self._run, name="mnemo-db-writer", daemon=True)
        self._thread.start()
        return self._opened

    def submit(self, job: Job, *, messages: int = 0) -> Future[Any]:
        """Queue `job` (a whole transaction); `messages` counts what is lost if it never runs."""
        future: Future[Any] = Future()
        with self._cond:
            if self._closing:
                raise SessionStoreError("the session store is not open")
            self._queue.append(_Queued(job, future, messages))
            self._cond.notify()
        return future

    def pending(self) -> int:
        """Jobs queued or running."""
        with self._cond:
            return len(self._queue)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every queued job has run; False if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def close(self, flush_timeout: float) -> int:
        """Run what is queued (up to `flush_timeout`), drop the rest; return messages lost."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        flushed = self.wait_idle(flush_timeout)
        lost = 0
        if not flushed:
            self._abandon.set()
            with self._cond:
                for queued in self._queue:
                    lost += queued.messages
                    if not queued.future.done():
                        queued.future.set_exception(
                            SessionStoreError("state.db stayed busy; this write was not stored")
                        )
                self._queue.clear()
                self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        return lost

    def _run(self) -> None:
        try:
            conn = self._opener()
        except BaseException as exc:
            self._opened.set_exception(exc)
            return
        self._opened.set_result(None)
        try:
            while (queued := self._next()) is not None:
                self._execute(conn, queued)
        finally:
            conn.close()

    def _next(self) -> _Queued | None:
        with self._cond:
            while not self._queue and not self._closing:
                self._cond.wait()
            return self._queue[0] if self._queue else None

    def _execute(self, conn: sqlite3.Connection, queued: _Queued) -> None:
        attempt = 0
        while True:
            try:
                result = queued.job(conn)
            except BaseException as exc:
                if is_busy(exc) and not self._abandon.is_set():
                    if attempt == 0:
                        log.warning("state.db is busy; write queued, retrying (%s)", exc)
                    if not self._abandon.wait(self._backoff.pause(attempt)):
                        attempt += 1
                        continue
                self._done(queued, exc=exc)
                return
            self._done(queued, result=result)
            return

    def _done(
        self, queued: _Queued, *, result: Any = None, exc: BaseException | None = None
    ) -> None:
        with self._cond:
            if self._queue and self._queue[0] is queued:
                self._queue.popleft()
            self._cond.notify_all()
            if queued.future.done():  # given up on by close()
                return
            if exc is None:
                queued.future.set_result(result)
            else:
                queued.future.set_exception(exc)

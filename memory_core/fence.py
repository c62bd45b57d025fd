"""Erasure fences: work that began before a person was erased writes nothing about them.

An erasure stops the person's turns and jobs it knows of, but some work is
out of its reach by then: a write already on its way to a store, a provider
job queued by a turn, a review that was scheduled and not yet started. So
the stores themselves refuse such writes. Every piece of work runs under
`working()`, which records when it began as a mark (a number from one
process-wide sequence) in a context variable; tasks started from it inherit
the mark, and a job queued for later carries `current_mark()` with it. An
erasure records a tombstone for the person (`ErasureFence.erasing`) before
it removes anything, and each store checks, at the moment it writes about a
person (under its lock, or in its writer thread), that no tombstone of that
person is newer than the writing work's mark; if one is, the write raises
`PersonErasedError` and nothing lands.

Writes outside any `working()` (an operator's CLI command, a start-up replay)
count as beginning when they are made, so only work that began before the
erasure is refused.

A mark is a time in nanoseconds, strictly increasing within the process,
taken from the process's `MarkClock`. With one process (SQLite) it is the host's
wall clock, as the tombstones it is compared with are made by the same clock.
When the stores are shared by several processes (PostgreSQL), marks must be
comparable across hosts whose clocks differ: the tombstones are then recorded
in the database (`remote`, a `SharedTombstones`) with the database server's
own clock, and the process's marks are the server's clock too, read through
the host's monotonic clock from a calibration (`MarkClock.adopt`: the server's
time bracketed by two monotonic readings; see `memory_core.pg.fence`). The
host's wall clock then plays no part, so a host 30 s ahead or behind is fenced
as exactly as one on time. The error left is that of the calibration: half
the round trip of its best sample (a millisecond or less on one network),
plus what the host's monotonic clock drifted since it was taken (a few parts
per million, over the minute between calibrations). Each process's stores
check the shared tombstones inside the write's own transaction, so an erasure
made by one replica fences the work another began before it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Protocol

from memory_core.errors import PersonErasedError

_began: ContextVar[int | None] = ContextVar("mnemo_work_began", default=None)


class MarkClock:
    """Where a process's marks come from: the host's wall clock (`wall`, nanoseconds)
    until a calibration is adopted, then the reference clock it measured (the
    database server's) carried forward by the host's `monotonic` clock."""

    def __init__(
        self,
        wall: Callable[[], int] = time.time_ns,
        monotonic: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self._wall = wall
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._last = 0
        self._base: tuple[int, int] | None = None  # (reference ns, monotonic ns) together
        self._error = 0

    def monotonic(self) -> int:
        """The host's monotonic clock, as calibrations bracket their readings with it."""
        return self._monotonic()

    def adopt(self, reference: int, sent: int, received: int) -> None:
        """Follow the reference clock from now on: it read `reference` (ns) between the
        monotonic readings `sent` and `received`; the midpoint is off by at most half
        the round trip."""
        with self._lock:
            self._base = (reference, (sent + received) // 2)
            self._error = max(received - sent, 0) // 2

    @property
    def calibrated(self) -> bool:
        """Whether marks follow a reference clock (not the host's wall clock)."""
        return self._base is not None

    @property
    def error_ns(self) -> int:
        """The calibration's error bound (half its round trip); 0 before one."""
        return self._error

    def now(self) -> int:
        """The time in nanoseconds: the reference's once calibrated, else the wall's."""
        base = self._base
        if base is None:
            return self._wall()
        reference, at = base
        return reference + (self._monotonic() - at)

    def next(self) -> int:
        """A mark newer than every mark this clock handed out before: `now()` (one more
        than the last mark when the clock has not moved on, or a new calibration put
        it back a little)."""
        with self._lock:
            self._last = max(self._last + 1, self.now())
            return self._last


PROCESS_MARKS = MarkClock()
"""The clock of this process's work and erasures; the PostgreSQL stores calibrate it."""


def next_mark() -> int:
    """A mark newer than every mark handed out before in this process (`PROCESS_MARKS`)."""
    return PROCESS_MARKS.next()


class SharedTombstones(Protocol):
    """Erasures recorded where every process sharing the stores sees them."""

    def record(self, user_key: str) -> int:
        """Keep `user_key`'s erasure, marked by the shared clock when it is recorded
        (committed before this returns); that mark."""
        ...


def current_mark() -> int:
    """When the current work began; outside any `working()`, now."""
    began = _began.get()
    return began if began is not None else next_mark()


@contextlib.contextmanager
def working(mark: int | None = None) -> Iterator[int]:
    """Run the block as work that began now, or at `mark` (a job queued earlier)."""
    token = _began.set(next_mark() if mark is None else mark)
    try:
        yield _began.get() or 0
    finally:
        _began.reset(token)


class ErasureFence:
    """The people erased in this process, each with the mark of their latest erasure
    (and, with `remote`, recorded for every process sharing the stores)."""

    def __init__(self, remote: SharedTombstones | None = None) -> None:
        self._erased: dict[str, int] = {}
        self._lock = threading.Lock()
        self.remote = remote

    def erasing(self, user_key: str) -> int:
        """`user_key` is being erased: from now on, work begun before writes nothing
        about them. Call it before anything is removed; returns the tombstone's mark."""
        mark = next_mark()
        with self._lock:
            self._erased[user_key] = max(mark, self._erased.get(user_key, 0))
        if self.remote is not None:
            mark = max(mark, self.remote.record(user_key))  # before any store removes a row
            with self._lock:
                self._erased[user_key] = max(mark, self._erased[user_key])
        return mark

    def allows(self, user_key: str, mark: int | None = None) -> bool:
        """Whether work begun at `mark` (default: the current work) may write about
        `user_key`: the person was not erased since."""
        began = current_mark() if mark is None else mark
        with self._lock:
            return self._erased.get(user_key, 0) < began

    def check(self, user_key: str, mark: int | None = None) -> None:
        """Raise `PersonErasedError` unless `allows(user_key, mark)`."""
        if not self.allows(user_key, mark):
            raise PersonErasedError(
                "this person's data was erased after this work began; nothing was written"
            )

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

A mark is the wall-clock time in nanoseconds when the work began (made
strictly increasing within the process), so marks of different processes can
be compared. Tombstones live in memory, and, when the stores are shared by
several processes (PostgreSQL), also in the database (`remote`, a
`SharedTombstones`): each process's stores check the shared ones too, inside
the write's own transaction, so an erasure made by one replica fences the
work another began before it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Protocol

from memory_core.errors import PersonErasedError

_last = 0
_sequence_lock = threading.Lock()
_began: ContextVar[int | None] = ContextVar("mnemo_work_began", default=None)


def next_mark() -> int:
    """A mark newer than every mark handed out before in this process: the wall clock in
    nanoseconds (one more than the last mark when the clock has not moved on)."""
    global _last
    with _sequence_lock:
        _last = max(_last + 1, time.time_ns())
        return _last


class SharedTombstones(Protocol):
    """Erasures recorded where every process sharing the stores sees them."""

    def record(self, user_key: str, mark: int) -> None:
        """Keep `user_key`'s erasure at `mark` (committed before this returns)."""
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
            self._erased[user_key] = mark
        if self.remote is not None:
            self.remote.record(user_key, mark)  # before any store removes a row
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

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
erasure is refused. Tombstones live in memory: a new process begins all its
work after any erasure an earlier one made.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from contextvars import ContextVar

from memory_core.errors import PersonErasedError

_sequence = itertools.count(1)
_sequence_lock = threading.Lock()
_began: ContextVar[int | None] = ContextVar("mnemo_work_began", default=None)


def next_mark() -> int:
    """A mark newer than every mark handed out before (in this process)."""
    with _sequence_lock:
        return next(_sequence)


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
    """The people erased in this process, each with the mark of their latest erasure."""

    def __init__(self) -> None:
        self._erased: dict[str, int] = {}
        self._lock = threading.Lock()

    def erasing(self, user_key: str) -> int:
        """`user_key` is being erased: from now on, work begun before writes nothing
        about them. Call it before anything is removed; returns the tombstone's mark."""
        mark = next_mark()
        with self._lock:
            self._erased[user_key] = mark
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

"""Background jobs as claims: the queue every replica takes reviews, extractions and the
quiet-time sweep from, so that each runs once.

A job is one open row per (kind, key): ``("review", session key)``,
``("extract", session id)``, ``("sweep", "quiet")``. `JobQueue.enqueue` adds it
unless one of that kind and key is open already (due, or running somewhere);
`claim` hands the due ones to one owner for a lease of some seconds; the owner
`renew`s the lease while it works and, once the work has committed, `finish`es
the job (or `release`s it to be due again some seconds from now: the sweep's
next round, a run cut short by a shutdown or failed by the database being
away). A lease that runs out (its holder died,
or stalled longer than the lease) lets another owner claim the job: a job is
never lost with its holder, and it runs again from what its own progress says
(an extraction from its per-session mark). `cancel` closes the open job of a
kind and key (a review the person talked over), `forget_person` removes every
row of a person; a holder whose `renew` or `finish` answers False has lost the
job and stops.

Times are the queue's own: callers give durations (a lease, a delay, an age),
never a time, so that replicas whose clocks differ agree on when a lease runs
out. `InProcessJobs` reads the clock it is given (a test's clock drives its
leases); on PostgreSQL every time is the server's `clock_timestamp()`.
`InProcessJobs` is the queue of the embedded default (one process, SQLite):
it keeps nothing across a restart, which is today's guarantee, since state.db
already says which sessions are due (the first sweep after a start finds them)
and the review counters call for the next review. On PostgreSQL the queue is a
table (`memory_core.pg.session_jobs`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from memory_core.errors import PostgresUnavailableError


@dataclass(frozen=True)
class JobRequest:
    """A job to run once: its kind and key, whose data it touches, what it needs."""

    kind: str
    key: str
    user_key: str | None = None
    payload: str = ""
    mark: int | None = None  # the erasure-fence mark of the work that asked for it
    delay: float = 0.0  # due this many seconds after it is enqueued


@dataclass(frozen=True)
class ClaimedJob:
    """A job an owner holds until `lease_until` (unless renewed)."""

    id: int
    kind: str
    key: str
    user_key: str | None
    payload: str
    mark: int | None
    attempts: int  # claims so far, this one included: more than 1 is a takeover or a retry
    lease_until: float  # in the queue's clock


@dataclass(frozen=True)
class OpenJob:
    """An open job as an operator (or a test) sees it."""

    id: int
    kind: str
    key: str
    due_at: float
    attempts: int
    lease_owner: str | None
    lease_until: float | None


class JobQueue(Protocol):
    """Where background jobs wait and are claimed, once, by one owner at a time."""

    async def enqueue(self, request: JobRequest) -> bool:
        """Add the job; False when one of its kind and key is open already."""
        ...

    async def claim(self, owner: str, lease: float, limit: int) -> list[ClaimedJob]:
        """Take up to `limit` jobs due now that nobody holds (or whose lease ran out),
        each leased to `owner` for `lease` seconds."""
        ...

    async def renew(self, job_id: int, owner: str, lease: float) -> bool:
        """Extend the lease to `lease` seconds from now; False when the job is no longer
        `owner`'s."""
        ...

    async def finish(self, job_id: int, owner: str) -> bool:
        """Close the job (its work has committed); False when it was not `owner`'s."""
        ...

    async def release(self, job_id: int, owner: str, delay: float = 0.0) -> bool:
        """Give the job back, due again `delay` seconds from now; False when it was not
        `owner`'s."""
        ...

    async def cancel(self, kind: str, key: str) -> int:
        """Close the open job of `kind` and `key` (its holder stops at its next renewal)."""
        ...

    async def forget_person(self, user_key: str) -> int:
        """Remove every job of `user_key`, open or done; how many."""
        ...

    async def prune(self, age: float) -> int:
        """Remove the jobs done more than `age` seconds ago; how many."""
        ...

    async def open_jobs(self) -> list[OpenJob]:
        """The open jobs, by due time."""
        ...

    def transient(self, error: BaseException) -> bool:
        """Whether a job that failed with `error` may succeed if run again: its database
        was away or its connection cut (not a mistake that would fail again)."""
        ...


@dataclass
class _Row:
    id: int
    request: JobRequest
    due_at: float
    attempts: int = 0
    lease_owner: str | None = None
    lease_until: float | None = None
    done_at: float | None = None


class InProcessJobs:
    """`JobQueue` in this process's memory: the embedded default's queue. Each method
    runs to its end without awaiting, so calls from concurrent tasks never interleave.
    `clock` gives its times (unix seconds)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._rows: dict[int, _Row] = {}
        self._open_ids: dict[tuple[str, str], int] = {}  # (kind, key) -> the open row's id
        self._next_id = 1

    def _open(self, kind: str, key: str) -> _Row | None:
        job_id = self._open_ids.get((kind, key))
        return None if job_id is None else self._rows[job_id]

    def _open_rows(self) -> list[_Row]:
        return sorted(
            (self._rows[job_id] for job_id in self._open_ids.values()),
            key=lambda row: (row.due_at, row.id),
        )

    def _held(self, job_id: int, owner: str) -> _Row | None:
        row = self._rows.get(job_id)
        if row is None or row.done_at is not None or row.lease_owner != owner:
            return None
        return row

    def _close(self, row: _Row, now: float) -> None:
        row.done_at, row.lease_until = now, None
        del self._open_ids[(row.request.kind, row.request.key)]

    async def enqueue(self, request: JobRequest) -> bool:
        if self._open(request.kind, request.key) is not None:
            return False
        row = _Row(self._next_id, request, self._clock() + request.delay)
        self._rows[row.id] = row
        self._open_ids[(request.kind, request.key)] = row.id
        self._next_id += 1
        return True

    async def claim(self, owner: str, lease: float, limit: int) -> list[ClaimedJob]:
        now = self._clock()
        due = [
            row
            for row in self._open_rows()
            if row.due_at <= now and (row.lease_until is None or row.lease_until < now)
        ][: max(limit, 0)]
        for row in due:
            row.lease_owner, row.lease_until = owner, now + lease
            row.attempts += 1
        return [_claimed(row) for row in due]

    async def renew(self, job_id: int, owner: str, lease: float) -> bool:
        row = self._held(job_id, owner)
        if row is not None:
            row.lease_until = self._clock() + lease
        return row is not None

    async def finish(self, job_id: int, owner: str) -> bool:
        row = self._held(job_id, owner)
        if row is not None:
            self._close(row, self._clock())
        return row is not None

    async def release(self, job_id: int, owner: str, delay: float = 0.0) -> bool:
        row = self._held(job_id, owner)
        if row is not None:
            row.due_at, row.lease_owner, row.lease_until = self._clock() + delay, None, None
        return row is not None

    async def cancel(self, kind: str, key: str) -> int:
        row = self._open(kind, key)
        if row is not None:
            self._close(row, self._clock())
        return 0 if row is None else 1

    async def forget_person(self, user_key: str) -> int:
        gone = [row for row in self._rows.values() if row.request.user_key == user_key]
        for row in gone:
            del self._rows[row.id]
            if row.done_at is None:
                del self._open_ids[(row.request.kind, row.request.key)]
        return len(gone)

    async def prune(self, age: float) -> int:
        before = self._clock() - age
        gone = [
            job_id
            for job_id, row in self._rows.items()
            if row.done_at is not None and row.done_at < before
        ]
        for job_id in gone:
            del self._rows[job_id]
        return len(gone)

    async def open_jobs(self) -> list[OpenJob]:
        return [
            OpenJob(
                row.id,
                row.request.kind,
                row.request.key,
                row.due_at,
                row.attempts,
                row.lease_owner,
                row.lease_until,
            )
            for row in self._open_rows()
        ]

    def transient(self, error: BaseException) -> bool:
        return isinstance(error, PostgresUnavailableError)


def _claimed(row: _Row) -> ClaimedJob:
    request = row.request
    assert row.lease_until is not None  # just claimed
    return ClaimedJob(
        row.id,
        request.kind,
        request.key,
        request.user_key,
        request.payload,
        request.mark,
        row.attempts,
        row.lease_until,
    )

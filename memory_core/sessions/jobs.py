"""Background jobs as claims: the queue every replica takes reviews, extractions and the
quiet-time sweep from, so that each runs once.

A job is one open row per (kind, key): ``("review", session key)``,
``("extract", session id)``, ``("sweep", "quiet")``. `JobQueue.enqueue` adds it
unless one of that kind and key is open already (due, or running somewhere);
`claim` hands the due ones to one owner for a lease of some seconds; the owner
`renew`s the lease while it works and, once the work has committed, `finish`es
the job (or `release`s it to be due again at a given time: the sweep's next
round, a run cut short by a shutdown). A lease that runs out (its holder died,
or stalled longer than the lease) lets another owner claim the job: a job is
never lost with its holder, and it runs again from what its own progress says
(an extraction from its per-session mark). `cancel` closes the open job of a
kind and key (a review the person talked over), `forget_person` removes every
row of a person; a holder whose `renew` or `finish` answers False has lost the
job and stops.

Times are the caller's unix seconds (`now`), so a test's clock drives leases
too. `InProcessJobs` is the queue of the embedded default (one process, SQLite):
it keeps nothing across a restart, which is today's guarantee, since state.db
already says which sessions are due (the first sweep after a start finds them)
and the review counters call for the next review. On PostgreSQL the queue is a
table (`memory_core.pg.session_jobs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class JobRequest:
    """A job to run once: its kind and key, whose data it touches, what it needs."""

    kind: str
    key: str
    due_at: float
    user_key: str | None = None
    payload: str = ""
    mark: int | None = None  # the erasure-fence mark of the work that asked for it


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
    lease_until: float


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

    async def claim(self, owner: str, now: float, lease: float, limit: int) -> list[ClaimedJob]:
        """Take up to `limit` jobs due by `now` that nobody holds (or whose lease ran out)."""
        ...

    async def renew(self, job_id: int, owner: str, now: float, lease: float) -> bool:
        """Extend the lease to `now + lease`; False when the job is no longer `owner`'s."""
        ...

    async def finish(self, job_id: int, owner: str, now: float) -> bool:
        """Close the job (its work has committed); False when it was not `owner`'s."""
        ...

    async def release(self, job_id: int, owner: str, due_at: float) -> bool:
        """Give the job back, due again at `due_at`; False when it was not `owner`'s."""
        ...

    async def cancel(self, kind: str, key: str, now: float) -> int:
        """Close the open job of `kind` and `key` (its holder stops at its next renewal)."""
        ...

    async def forget_person(self, user_key: str) -> int:
        """Remove every job of `user_key`, open or done; how many."""
        ...

    async def prune(self, before: float) -> int:
        """Remove the jobs done before `before`; how many."""
        ...

    async def open_jobs(self) -> list[OpenJob]:
        """The open jobs, by due time."""
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
    runs to its end without awaiting, so calls from concurrent tasks never interleave."""

    def __init__(self) -> None:
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
        row = _Row(self._next_id, request, request.due_at)
        self._rows[row.id] = row
        self._open_ids[(request.kind, request.key)] = row.id
        self._next_id += 1
        return True

    async def claim(self, owner: str, now: float, lease: float, limit: int) -> list[ClaimedJob]:
        due = [
            row
            for row in self._open_rows()
            if row.due_at <= now and (row.lease_until is None or row.lease_until < now)
        ][: max(limit, 0)]
        for row in due:
            row.lease_owner, row.lease_until = owner, now + lease
            row.attempts += 1
        return [_claimed(row) for row in due]

    async def renew(self, job_id: int, owner: str, now: float, lease: float) -> bool:
        row = self._held(job_id, owner)
        if row is not None:
            row.lease_until = now + lease
        return row is not None

    async def finish(self, job_id: int, owner: str, now: float) -> bool:
        row = self._held(job_id, owner)
        if row is not None:
            self._close(row, now)
        return row is not None

    async def release(self, job_id: int, owner: str, due_at: float) -> bool:
        row = self._held(job_id, owner)
        if row is not None:
            row.due_at, row.lease_owner, row.lease_until = due_at, None, None
        return row is not None

    async def cancel(self, kind: str, key: str, now: float) -> int:
        row = self._open(kind, key)
        if row is not None:
            self._close(row, now)
        return 0 if row is None else 1

    async def forget_person(self, user_key: str) -> int:
        gone = [row for row in self._rows.values() if row.request.user_key == user_key]
        for row in gone:
            del self._rows[row.id]
            if row.done_at is None:
                del self._open_ids[(row.request.kind, row.request.key)]
        return len(gone)

    async def prune(self, before: float) -> int:
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

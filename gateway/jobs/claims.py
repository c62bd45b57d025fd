"""How one replica holds a claimed job: its owner name, the lease it keeps, the payloads.

A job claimed from the `JobQueue` is leased for `BackgroundSettings.job_lease`
seconds; while it runs, `keep_lease` renews the lease every third of that, and
cancels the job's task when the queue answers that the job is no longer this
owner's (the review was talked over or its person erased on another replica, or
the lease ran out while this process stalled and another replica took the job
over), or when renewing fails until the lease has run out. So a job runs at one
owner at a time for as long as its holder renews in time: a holder stalled past
its lease (a frozen process) may overlap the one that took over until its next
renewal stops it, which the work itself tolerates (an extraction resumes from
its per-session mark, an identical entry is not stored twice). Leases are kept
in the queue's clock (on PostgreSQL the server's), so hosts' clocks that
differ do not shorten or stretch them; while the queue cannot be reached, a
holder counts its lease on its own monotonic clock from when it asked for it,
which ends no later than the queue's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import socket
import time
import uuid

from gateway.jobs.context import JOB_LEASE_SECONDS
from gateway.jobs.review import ReviewRequest
from gateway.session_queue import decode, encode
from memory_core.sessions import ClaimedJob, JobQueue

log = logging.getLogger(__name__)

CLAIM_SECONDS = 5.0  # how often each replica looks for due jobs (besides after a reply)
CLAIM_LIMIT = 16  # jobs one replica runs at once; the model limiter paces their calls
MAX_ATTEMPTS = 5  # claims of one job before a run cut short or failed closes it anyway
RETRY_SECONDS = 15.0  # a job failed by the database being away: due again this long per attempt

REVIEW = "review"
EXTRACT = "extract"
SWEEP = "sweep"
SWEEP_KEY = "quiet"


def owner_name() -> str:
    """This replica's name in the job table: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def review_payload(request: ReviewRequest) -> str:
    """The review request as a row keeps it: the message without its words or the
    person's name (only its chat is needed, to hear of the outcome), so no job row
    holds what a person said."""
    quiet = dataclasses.replace(request.message, text="", media=(), user_name=None)
    return json.dumps({"session_id": request.session_id, "message": encode(quiet)})


def review_request(payload: str) -> ReviewRequest:
    fields = json.loads(payload)
    return ReviewRequest(int(fields["session_id"]), decode(str(fields["message"])))


def extraction_payload(ending: bool) -> str:
    return json.dumps({"ending": ending})


def extraction_ending(payload: str) -> bool:
    return bool(json.loads(payload or "{}").get("ending", True))


async def keep_lease(
    queue: JobQueue,
    job: ClaimedJob,
    owner: str,
    task: asyncio.Task[object],
    *,
    lease: float = JOB_LEASE_SECONDS,
    every: float = JOB_LEASE_SECONDS / 3,
    since: float | None = None,
) -> None:
    """Renew `job`'s lease every `every` s until cancelled; cancel `task` once the job is
    lost (the queue says it is no longer `owner`'s, or the lease ran out unrenewed).
    `since`: when the claim was asked for (`time.monotonic()`; default now)."""
    until = (time.monotonic() if since is None else since) + lease
    while True:
        await asyncio.sleep(every)
        asked = time.monotonic()
        try:
            kept = await queue.renew(job.id, owner, lease)
        except Exception:  # the database is away: the lease may still hold
            log.warning("could not renew the lease of job %d", job.id, exc_info=True)
            kept = time.monotonic() < until
        else:
            until = asked + lease if kept else until
        if not kept:
            log.info("job %d (%s %s) is no longer ours: stopping it", job.id, job.kind, job.key)
            task.cancel()
            return

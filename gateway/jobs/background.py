"""The background work of a running bot: reviews, extractions and the quiet-time sweep.

`BackgroundWork` decides what is due and runs what its replica claims:

- Every review, extraction and sweep is a job in a `JobQueue` (one open job per
  kind and key: a review per session key, an extraction per session, one sweep),
  claimed by one replica at a time under a lease (`gateway.jobs.claims`): on
  PostgreSQL a table every replica shares, in the embedded default a queue in
  this process. The scheduler of each replica only triggers the claiming: every
  `CLAIM_SECONDS` (or the sweep interval, when shorter), and right after a job is
  asked for. A job whose holder died is claimed by another replica once its lease
  runs out; a job cut short by a shutdown is given back, due at once.
- After a reply is delivered, `after_reply` first has what the person's own turn
  staged for their approval (`turn_staging`) announced once, as a background
  batch is: in their private chat only. Then it reads the session's counters and,
  when `memory.nudge_interval` turns or `skills.creation_nudge_interval` tool
  steps have passed without a write, asks for a review of that session (one
  per session at a time). `message_arrived` cancels a review in flight: the
  person is talking again (here at once; on another replica at its next lease
  renewal), and the counters still say a review is due, so the next reply asks
  for a new one.
- `session_ended` asks for the extraction of a session that just ended.
- The sweep (first run at start-up, then every `sweep_seconds`, by one replica)
  asks for the extractions still due in the session store (sessions that ended
  before a restart, or whose extraction failed), and finds sessions quiet for
  `sessions.idle_minutes`: it extracts them and keeps them open, or, with
  `sessions.idle_reset`, ends them (their extraction follows). Nothing pending
  lives only in the queue: the store says which sessions are due and how far
  each extraction got, so a restart, or a replica dying mid-job, loses none.
- A job is closed once its work has committed, and only then. A run cut short
  (a shutdown, its lease lost) or failed by the database being away
  (`JobQueue.transient`) is given back to run again, a review as well as an
  extraction: at once when cut, `RETRY_SECONDS` per attempt later when failed,
  until it has been claimed `MAX_ATTEMPTS` times (then it is closed, and said
  so). A run failed for any other reason is closed: running it again would
  fail again. An extraction stores its progress after each chunk, so one run
  again after a crash (or taken over) starts where the last stopped; a chunk
  written but not yet marked is offered again; a review runs again from the
  start. Either way an identical entry is not stored twice (the memory store
  keeps one: "already exists").
- A job runs as work begun when it was asked for (`memory_core.fence`, the mark
  travels in the job), so if its person is erased before it starts or while it
  runs, the stores refuse its writes.
- `close` cancels reviews, gives running extractions `shutdown_grace` seconds,
  and gives the rest back to the queue (another replica, or the next start,
  runs them again). A review cut by its person writing again, or a job of a
  person being erased, is not given back: the queue closed or removed it.
- Times are the queue's (`JobQueue`: on PostgreSQL the server's clock), so
  replicas whose clocks differ agree on leases and due times.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from gateway.agent.tools import TurnStaging
from gateway.jobs.claims import (
    CLAIM_LIMIT,
    CLAIM_SECONDS,
    EXTRACT,
    MAX_ATTEMPTS,
    RETRY_SECONDS,
    REVIEW,
    SWEEP,
    SWEEP_KEY,
    extraction_ending,
    extraction_payload,
    keep_lease,
    owner_name,
    review_payload,
    review_request,
)
from gateway.jobs.context import JobContext, SessionEnder
from gateway.jobs.extraction import extract_session
from gateway.jobs.review import ReviewRequest, review_session
from gateway.messages import InboundMessage
from gateway.scheduler import JobInfo, Scheduler
from memory_core import PersonErasedError, current_mark, working
from memory_core.sessions import ClaimedJob, InProcessJobs, JobQueue, JobRequest

log = logging.getLogger(__name__)

CLAIM_JOB = "claim"
BACKLOG_LIMIT = 100  # sessions taken per sweep; the rest wait for the next one
DONE_KEPT_SECONDS = 86_400.0  # closed jobs are pruned by the sweep after a day


def review_job_id(session_key: str) -> str:
    return f"review:{session_key}"


def extraction_job_id(session_id: int) -> str:
    return f"extract:{session_id}"


def _job_id(job: ClaimedJob) -> str:
    return f"{job.kind}:{job.key}"


class BackgroundWork:
    """Asks for reviews and extractions of one bot's conversations, and runs what it
    claims of them (see the module doc)."""

    def __init__(
        self,
        context: JobContext,
        queue: JobQueue | None = None,
        *,
        owner: str | None = None,
        renew_seconds: float | None = None,
    ) -> None:
        self._context = context
        self._queue: JobQueue = InProcessJobs() if queue is None else queue
        self._owner = owner_name() if owner is None else owner
        self._lease = context.settings.job_lease
        self._renew = self._lease / 3 if renew_seconds is None else renew_seconds
        self._scheduler: Scheduler[JobContext] | None = None
        self._claimed: dict[str, ClaimedJob] = {}  # by scheduler job id: claimed, unsettled
        self._cancelling: dict[str, asyncio.Task[None]] = {}  # session key -> review cancel
        self._pumping = False
        self._wanted = False
        self._closing = False
        self._turn_staging = TurnStaging()

    @property
    def context(self) -> JobContext:
        return self._context

    @property
    def queue(self) -> JobQueue:
        return self._queue

    @property
    def owner(self) -> str:
        """This replica's name on the jobs it holds."""
        return self._owner

    @property
    def turn_staging(self) -> TurnStaging:
        """Where the turns' tools keep what they staged, announced after the reply."""
        return self._turn_staging

    def start(self, end_session: SessionEnder) -> None:
        """Start the scheduler (inside the running loop); the first claim (and sweep,
        unless another replica's is open) runs now."""
        if self._scheduler is not None or self._closing:
            return
        self._context = dataclasses.replace(self._context, end_session=end_session)
        self._scheduler = Scheduler(self._context)
        self._scheduler.start()
        every = min(CLAIM_SECONDS, self._context.settings.sweep_seconds)
        self._scheduler.every(CLAIM_JOB, _tick, every, self, first_delay=0.0)

    async def close(self) -> list[str]:
        """Cancel reviews, let running extractions finish within the grace period.

        Returns the ids of the jobs cut short; they are given back to the queue, and
        what they had left stays due in the session store.
        """
        self._closing = True
        if self._scheduler is None:
            return []
        scheduler, self._scheduler = self._scheduler, None
        for task in self._cancelling.values():
            task.cancel()
        for job_id in list(self._claimed):
            if job_id.startswith(f"{REVIEW}:"):
                scheduler.cancel(job_id)
        cut = await scheduler.shutdown(self._context.settings.shutdown_grace)
        for job in list(self._claimed.values()):  # claimed, never started: due again now
            await self._settle(job, cut=True)
        if cut:
            log.info("background jobs left for the next start: %s", ", ".join(cut))
        return cut

    def jobs(self) -> list[JobInfo]:
        """The scheduled and running jobs of this replica (empty before `start`)."""
        return [] if self._scheduler is None else self._scheduler.jobs()

    def message_arrived(self, session_key: str) -> None:
        """The person wrote again: a review of their session in flight stops."""
        scheduler = self._scheduler
        if scheduler is None:
            return
        job_id = review_job_id(session_key)
        scheduler.cancel(job_id)
        self._claimed.pop(job_id, None)
        running = self._cancelling.get(session_key)
        if running is None or running.done():
            self._cancelling[session_key] = asyncio.ensure_future(
                self._cancel_review(scheduler, session_key)
            )

    async def _cancel_review(self, scheduler: Scheduler[JobContext], session_key: str) -> None:
        try:
            await self._queue.cancel(REVIEW, session_key)
            await scheduler.wait_idle(
                review_job_id(session_key), self._context.settings.shutdown_grace
            )
        except Exception:  # the review may still run out; it writes what it learned
            log.exception("could not cancel the review of %s", session_key)

    async def after_reply(self, session_key: str, session_id: int, message: InboundMessage) -> None:
        """Announce what the person's turn staged, then ask for a review of the session
        when its counters say one is due."""
        staged = self._turn_staging.take(session_key, message.user_key)
        if staged and self._context.announce is not None:
            try:
                await self._context.announce(message.platform, message.user_key, staged)
            except Exception:  # the reply is delivered; the changes stay in /memory pending
                log.exception("could not announce the changes staged in session %s", session_key)
        cancelling = self._cancelling.pop(session_key, None)
        if cancelling is not None:
            await asyncio.wait([cancelling])  # the old review closed before a new one opens
        if self._scheduler is None:
            return
        counters = await self._context.sessions.get_counters(session_id)
        if counters is None or not self._context.settings.review_due(
            counters.turns_since_memory, counters.steps_since_skill
        ):
            return
        payload = review_payload(ReviewRequest(session_id, message))
        try:
            await self._ask(REVIEW, session_key, message.user_key, payload)
        except Exception:  # the reply is delivered; the counters call for it at the next one
            log.exception("could not ask for a review of session %s", session_key)

    def session_ended(self, session_id: int, user_key: str) -> None:
        """Extract what the ended session taught (now, in the background)."""
        self.extract(session_id, user_key, ending=True)

    def extract(self, session_id: int, user_key: str, *, ending: bool) -> None:
        """Ask for the extraction of `session_id` (unless one is open already)."""
        scheduler = self._scheduler
        if scheduler is None:
            return  # not started: the next start's sweep finds it due
        job_id = f"ask:{extraction_job_id(session_id)}"
        scheduler.once(job_id, _ask_extraction, self, session_id, user_key, ending, current_mark())

    async def ask_extraction(self, session_id: int, user_key: str, *, ending: bool) -> None:
        """`extract`, awaited: the job is in the queue when this returns."""
        await self._ask(EXTRACT, str(session_id), user_key, extraction_payload(ending))

    async def _ask(
        self, kind: str, key: str, user_key: str | None, payload: str, mark: int | None = None
    ) -> None:
        mark = current_mark() if mark is None and kind != SWEEP else mark
        request = JobRequest(kind, key, user_key, payload, mark)
        await self._queue.enqueue(request)
        await self.claim_due()

    async def claim_due(self) -> None:
        """Claim the due jobs this replica has room for and start them; a call while
        claiming makes the running one go round once more."""
        self._wanted = True
        if self._pumping:
            return
        self._pumping = True
        try:
            while self._wanted:
                self._wanted = False
                await self._claim_round()
        finally:
            self._pumping = False

    async def _claim_round(self) -> None:
        scheduler = self._scheduler
        room = CLAIM_LIMIT - len(self._claimed)
        if scheduler is None or self._closing or room <= 0:
            return
        asked = time.monotonic()  # the leases begin after this
        claimed = await self._queue.claim(self._owner, self._lease, room)
        for job in claimed:
            job_id = _job_id(job)
            if scheduler.is_running(job_id) or job_id in self._claimed:
                # a cancelled run of that id is finishing: the next round takes it
                await self._queue.release(job.id, self._owner)
                continue
            self._claimed[job_id] = job
            scheduler.once(job_id, _run_claimed, self, job, asked)

    async def forget_person(self, user_key: str) -> None:
        """Stop every job touching `user_key`'s data (before it is erased), and wait."""
        await self._queue.forget_person(user_key)  # other replicas' holders stop at renewal
        scheduler = self._scheduler
        if scheduler is None:
            return
        for job_id, job in list(self._claimed.items()):
            if job.user_key == user_key:
                scheduler.cancel(job_id)
                self._claimed.pop(job_id, None)
                await scheduler.wait_idle(job_id, self._context.settings.shutdown_grace)

    async def _settle(self, job: ClaimedJob, cut: bool, failed: bool = False) -> None:
        """Close the job, or give it back: the sweep's next round, a run cut short or
        failed by the database being away (see the module doc)."""
        if self._claimed.get(_job_id(job)) is job:
            del self._claimed[_job_id(job)]
        elif cut:
            return  # dropped by `message_arrived` or `forget_person`: the queue closed it
        try:
            if job.kind == SWEEP:
                delay = 0.0 if cut else self._context.settings.sweep_seconds
                await self._queue.release(job.id, self._owner, delay)
            elif (cut or failed) and job.attempts < MAX_ATTEMPTS:
                delay = RETRY_SECONDS * job.attempts if failed else 0.0
                await self._queue.release(job.id, self._owner, delay)
            else:
                if cut or failed:
                    log.warning("job %s closed unfinished after %d attempts",
                                _job_id(job), job.attempts)  # fmt: skip
                await self._queue.finish(job.id, self._owner)
        except Exception:  # its lease runs out: another claim takes it again
            log.exception("could not settle job %s", _job_id(job))
        if not cut and self._scheduler is not None:
            self._scheduler.once(f"{CLAIM_JOB}-now", _claim_now, self)

    async def run(self, job: ClaimedJob, claimed: float | None = None) -> None:
        """Run a claimed job under its lease (asked for at `claimed`, monotonic seconds;
        default now), then settle it (a scheduler job)."""
        task = asyncio.current_task()
        assert task is not None
        renewal = asyncio.create_task(
            keep_lease(
                self._queue, job, self._owner, task,
                lease=self._lease, every=self._renew, since=claimed,
            )
        )  # fmt: skip
        cut = failed = False
        try:
            with working(current_mark() if job.mark is None else job.mark):
                await _perform(self._context, self, job)
        except PersonErasedError:
            log.info("job %s wrote nothing: its person was erased meanwhile", _job_id(job))
        except asyncio.CancelledError:
            cut = True
            raise
        except Exception as exc:
            failed = self._queue.transient(exc)
            if not failed:
                raise
            log.warning("job %s failed (%s), to run again", _job_id(job), exc)
        finally:
            renewal.cancel()
            await self._settle(job, cut, failed)


async def _perform(ctx: JobContext, work: BackgroundWork, job: ClaimedJob) -> None:
    if job.kind == REVIEW:
        await review_session(ctx, review_request(job.payload))
    elif job.kind == EXTRACT:
        await extract_session(ctx, int(job.key), extraction_ending(job.payload))
    elif job.kind == SWEEP:
        await sweep(ctx, work)
    else:
        log.warning("job %d of an unknown kind %r closed unrun", job.id, job.kind)


async def _run_claimed(
    ctx: JobContext, work: BackgroundWork, job: ClaimedJob, claimed: float
) -> None:
    await work.run(job, claimed)


async def _tick(ctx: JobContext, work: BackgroundWork) -> None:
    """The periodic claim: the sweep is asked for (one open at a time), due jobs claimed."""
    await work._ask(SWEEP, SWEEP_KEY, None, "")


async def _claim_now(ctx: JobContext, work: BackgroundWork) -> None:
    await work.claim_due()


async def _ask_extraction(
    ctx: JobContext, work: BackgroundWork, session_id: int, user_key: str, ending: bool, mark: int
) -> None:
    with working(mark):
        await work.ask_extraction(session_id, user_key, ending=ending)


async def sweep(ctx: JobContext, work: BackgroundWork) -> None:
    """Ask for the extractions due, and handle the sessions gone quiet (the sweep job)."""
    for entry in await ctx.sessions.pending_extractions(BACKLOG_LIMIT):
        await work.ask_extraction(entry.session_id, entry.user_key, ending=True)
    before = ctx.clock() - ctx.settings.idle_seconds
    for entry in await ctx.sessions.quiet_sessions(before, BACKLOG_LIMIT):
        if ctx.settings.idle_reset and entry.session_key is not None:
            await ctx.end_session(entry.session_key, entry.session_id, before)
        else:
            await work.ask_extraction(entry.session_id, entry.user_key, ending=False)
    await work.queue.prune(DONE_KEPT_SECONDS)

"""The background work of a running bot: reviews, extractions and the quiet-time sweep.

`BackgroundWork` owns the scheduler and decides what runs when:

- After a reply is delivered, `after_reply` first has what the person's own turn
  staged for their approval (`turn_staging`) announced once, as a background
  batch is: in their private chat only. Then it reads the session's counters and,
  when `memory.nudge_interval` turns or `skills.creation_nudge_interval` tool
  steps have passed without a write, schedules a review of that session (one
  per session at a time). `message_arrived` cancels a review in flight: the
  person is talking again, and the counters still say a review is due, so the
  next reply schedules a new one.
- `session_ended` schedules the extraction of a session that just ended.
- A periodic sweep (first run at start-up) runs the extractions still due in
  state.db (sessions that ended before a restart, or whose extraction failed),
  and finds sessions quiet for `sessions.idle_minutes`: it extracts them and
  keeps them open, or, with `sessions.idle_reset`, ends them (their extraction
  follows). Nothing pending lives only in memory: state.db says which
  sessions are due and how far each extraction got, so a restart loses none.
- A job runs as work begun when it was scheduled (`memory_core.fence`), so
  if its person is erased before it starts or while it runs, the stores
  refuse its writes.
- `close` cancels reviews, gives running extractions `shutdown_grace` seconds,
  and leaves the rest due for the next start.
"""

from __future__ import annotations

import dataclasses
import logging

from gateway.agent.tools import TurnStaging
from gateway.jobs.context import JobContext, SessionEnder
from gateway.jobs.extraction import extract_session
from gateway.jobs.review import ReviewRequest, review_session
from gateway.messages import InboundMessage
from gateway.scheduler import JobInfo, Scheduler
from memory_core import PersonErasedError, current_mark, working

log = logging.getLogger(__name__)

SWEEP_JOB = "quiet-sweep"
BACKLOG_LIMIT = 100  # sessions taken per sweep; the rest wait for the next one


def review_job_id(session_key: str) -> str:
    return f"review:{session_key}"


def extraction_job_id(session_id: int) -> str:
    return f"extract:{session_id}"


class BackgroundWork:
    """Schedules reviews and extractions for the conversations of one bot."""

    def __init__(self, context: JobContext) -> None:
        self._context = context
        self._scheduler: Scheduler[JobContext] | None = None
        self._owners: dict[str, str] = {}  # job id -> the user key whose data it touches
        self._turn_staging = TurnStaging()

    @property
    def context(self) -> JobContext:
        return self._context

    @property
    def turn_staging(self) -> TurnStaging:
        """Where the turns' tools keep what they staged, announced after the reply."""
        return self._turn_staging

    def start(self, end_session: SessionEnder) -> None:
        """Start the scheduler (inside the running loop); the first sweep runs now."""
        if self._scheduler is not None:
            return
        self._context = dataclasses.replace(self._context, end_session=end_session)
        self._scheduler = Scheduler(self._context)
        self._scheduler.start()
        self._scheduler.every(
            SWEEP_JOB, sweep, self._context.settings.sweep_seconds, self, first_delay=0.0
        )

    async def close(self) -> list[str]:
        """Cancel reviews, let running extractions finish within the grace period.

        Returns the ids of the jobs cut short; their work stays due in state.db.
        """
        if self._scheduler is None:
            return []
        scheduler, self._scheduler = self._scheduler, None
        for job_id in list(self._owners):
            if job_id.startswith("review:"):
                scheduler.cancel(job_id)
        cut = await scheduler.shutdown(self._context.settings.shutdown_grace)
        if cut:
            log.info("background jobs left for the next start: %s", ", ".join(cut))
        return cut

    def jobs(self) -> list[JobInfo]:
        """The scheduled and running jobs (empty before `start`)."""
        return [] if self._scheduler is None else self._scheduler.jobs()

    def message_arrived(self, session_key: str) -> None:
        """The person wrote again: a review of their session in flight stops."""
        if self._scheduler is not None:
            job_id = review_job_id(session_key)
            self._scheduler.cancel(job_id)
            self._owners.pop(job_id, None)

    async def after_reply(self, session_key: str, session_id: int, message: InboundMessage) -> None:
        """Announce what the person's turn staged, then schedule a review of the session
        when its counters say one is due."""
        staged = self._turn_staging.take(session_key, message.user_key)
        if staged and self._context.announce is not None:
            try:
                await self._context.announce(message.platform, message.user_key, staged)
            except Exception:  # the reply is delivered; the changes stay in /memory pending
                log.exception("could not announce the changes staged in session %s", session_key)
        scheduler = self._scheduler
        if scheduler is None:
            return
        job_id = review_job_id(session_key)
        if scheduler.is_running(job_id):
            return  # one review per session at a time
        counters = await self._context.sessions.get_counters(session_id)
        if counters is None or not self._context.settings.review_due(
            counters.turns_since_memory, counters.steps_since_skill
        ):
            return
        self._owners[job_id] = message.user_key
        request = ReviewRequest(session_id, message)
        scheduler.once(job_id, _review, self, job_id, request, current_mark())

    def session_ended(self, session_id: int, user_key: str) -> None:
        """Extract what the ended session taught (now, in the background)."""
        self.extract(session_id, user_key, ending=True)

    def extract(self, session_id: int, user_key: str, *, ending: bool) -> None:
        """Schedule the extraction of `session_id` unless one is running already."""
        scheduler = self._scheduler
        if scheduler is None:
            return  # not started: the next start's sweep finds it due
        job_id = extraction_job_id(session_id)
        if scheduler.is_running(job_id):
            return  # that run covers it, or the next sweep does
        self._owners[job_id] = user_key
        scheduler.once(job_id, _extract, self, job_id, session_id, ending, current_mark())

    async def forget_person(self, user_key: str) -> None:
        """Stop every job touching `user_key`'s data (before it is erased), and wait."""
        scheduler = self._scheduler
        if scheduler is None:
            return
        for job_id, owner in list(self._owners.items()):
            if owner == user_key:
                scheduler.cancel(job_id)
                self._owners.pop(job_id, None)
                await scheduler.wait_idle(job_id, self._context.settings.shutdown_grace)

    def job_done(self, job_id: str) -> None:
        self._owners.pop(job_id, None)


async def _review(
    ctx: JobContext, work: BackgroundWork, job_id: str, request: ReviewRequest, mark: int
) -> None:
    try:
        with working(mark):  # begun when it was scheduled: an erasure since fences it
            await review_session(ctx, request)
    except PersonErasedError:
        log.info("review %s wrote nothing: its person was erased meanwhile", job_id)
    finally:
        work.job_done(job_id)


async def _extract(
    ctx: JobContext,
    work: BackgroundWork,
    job_id: str,
    session_id: int,
    ending: bool,
    mark: int,
) -> None:
    try:
        with working(mark):
            await extract_session(ctx, session_id, ending)
    except PersonErasedError:
        log.info("extraction %s wrote nothing: its person was erased meanwhile", job_id)
    finally:
        work.job_done(job_id)


async def sweep(ctx: JobContext, work: BackgroundWork) -> None:
    """Schedule the extractions due, and handle the sessions gone quiet (a periodic job)."""
    for entry in await ctx.sessions.pending_extractions(BACKLOG_LIMIT):
        work.extract(entry.session_id, entry.user_key, ending=True)
    before = ctx.clock() - ctx.settings.idle_seconds
    for entry in await ctx.sessions.quiet_sessions(before, BACKLOG_LIMIT):
        if ctx.settings.idle_reset and entry.session_key is not None:
            await ctx.end_session(entry.session_key, entry.session_id, before)
        else:
            work.extract(entry.session_id, entry.user_key, ending=False)

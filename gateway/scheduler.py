"""Background jobs: a small wrapper over APScheduler's `AsyncIOScheduler`.

The application builds one `Scheduler` with a context object (what jobs need, never
the whole app), starts it inside the running event loop and shuts it down on the way
out. Jobs are coroutine functions called as ``await job(context, *args)``; `once`,
`every` and `cron` schedule them under an id, and a new schedule under an id replaces
the one not yet started.

Every run goes through one wrapper, the top of a job: it records the run's task so
`cancel` can stop it in flight, logs a failure with its traceback and lets nothing
reach APScheduler, and skips itself (debug log) when a run of the same id is still in
flight, so runs of one id never overlap.

Misfires are never skipped: a run due while the process was busy or the loop blocked
runs however late (``misfire_grace_time=None``), and a periodic job missed several
times runs once (``coalesce=True``). Times are UTC.

Jobs live in memory only: nothing scheduled here survives a restart. Work that must
(pending session-end extraction) is reconstructed by the application from state.db at
start-up, which records how far each session was extracted.

This is the only module that imports `apscheduler`; nothing happens at import time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Literal, TypeVar

from apscheduler.jobstores.base import JobLookupError  # type: ignore[import-untyped]
from apscheduler.schedulers.asyncio import AsyncIOScheduler  # type: ignore[import-untyped]
from apscheduler.triggers.cron import CronTrigger  # type: ignore[import-untyped]
from apscheduler.triggers.date import DateTrigger  # type: ignore[import-untyped]
from apscheduler.triggers.interval import IntervalTrigger  # type: ignore[import-untyped]

__all__ = ["Job", "JobInfo", "Scheduler"]

log = logging.getLogger(__name__)

C = TypeVar("C")
Job = Callable[..., Awaitable[None]]
Kind = Literal["once", "every", "cron"]

# APScheduler's own overlap guard (max_instances) warns on every skipped run; the
# wrapper skips overlapping runs itself, so APScheduler's limit is never reached.
_MAX_INSTANCES = 1_000_000
_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class JobInfo:
    """One scheduled or running job, as an operator sees it."""

    id: str
    kind: Kind
    next_run: datetime | None  # aware UTC; None while running or paused
    running: bool
    description: str  # "every 300 s", "cron 0 4 * * *", "once at 2026-12-01T04:00:00Z"


@dataclass(frozen=True, eq=False)
class _Plan:
    """One call of once/every/cron; a run whose plan is no longer current is skipped."""

    kind: Kind
    description: str


@dataclass(frozen=True)
class _Run:
    task: asyncio.Task[Any]
    plan: _Plan


class Scheduler(Generic[C]):
    """Wraps AsyncIOScheduler; started and stopped with the application."""

    def __init__(self, context: C) -> None:
        self._context = context
        self._aps = AsyncIOScheduler(
            timezone=UTC,
            job_defaults={
                "misfire_grace_time": None,
                "coalesce": True,
                "max_instances": _MAX_INSTANCES,
            },
        )
        self._plans: dict[str, _Plan] = {}  # the current schedule of each id
        self._running: dict[str, _Run] = {}
        self._started = False
        self._stopping = False

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        """Start firing jobs; call inside the running event loop. Idempotent; after
        `shutdown` it does nothing."""
        if self._started or self._stopping:
            return
        self._started = True
        self._aps.start()

    async def shutdown(self, timeout: float) -> list[str]:
        """Stop firing new runs, wait up to `timeout` s for running jobs to finish, then
        cancel the rest and wait (up to `timeout` s again) for them to stop. Returns the
        ids of the cancelled jobs. Idempotent."""
        if self._stopping:
            return []
        self._stopping = True
        if self._aps.running:
            self._aps.pause()
        cancelled = await self._finish_runs(timeout)
        if self._aps.running:
            self._aps.shutdown(wait=False)
            await asyncio.sleep(0)  # AsyncIOScheduler shuts down in a loop callback
        return cancelled

    async def _finish_runs(self, timeout: float) -> list[str]:
        runs = dict(self._running)
        if not runs:
            return []
        _, pending = await asyncio.wait([r.task for r in runs.values()], timeout=timeout)
        cancelled = sorted(job_id for job_id, r in runs.items() if r.task in pending)
        if not pending:
            return cancelled
        for task in pending:
            task.cancel()
        _, stuck = await asyncio.wait(pending, timeout=timeout)
        for job_id, r in runs.items():
            if r.task in stuck:
                log.warning("background job %s ignored its cancellation at shutdown", job_id)
        return cancelled

    # -- scheduling --------------------------------------------------------------

    def once(self, job_id: str, job: Job, *args: object, delay: float = 0.0) -> None:
        """Run `job` once after `delay` seconds."""
        when = _now() + timedelta(seconds=max(delay, 0.0))
        plan = _Plan("once", f"once at {_stamp(when)}")
        trigger = DateTrigger(run_date=when, timezone=UTC)
        self._add(job_id, job, args, plan, trigger, when)

    def every(
        self,
        job_id: str,
        job: Job,
        seconds: float,
        *args: object,
        first_delay: float | None = None,
    ) -> None:
        """Run `job` every `seconds`; the first run after `first_delay` (default `seconds`)."""
        if seconds <= 0:
            raise ValueError(f"job {job_id}: the interval must be positive, not {seconds}")
        first = _now() + timedelta(seconds=max(seconds if first_delay is None else first_delay, 0))
        plan = _Plan("every", f"every {seconds:g} s")
        trigger = IntervalTrigger(seconds=seconds, start_date=first, timezone=UTC)
        self._add(job_id, job, args, plan, trigger, first)

    def cron(self, job_id: str, job: Job, expression: str, *args: object) -> None:
        """Run `job` on a 5-field crontab `expression`, read in UTC."""
        try:
            trigger = CronTrigger.from_crontab(expression, timezone=UTC)
        except ValueError as exc:
            raise ValueError(f"job {job_id}: bad cron expression {expression!r}: {exc}") from None
        self._add(job_id, job, args, _Plan("cron", f"cron {expression}"), trigger, None)

    def _add(
        self,
        job_id: str,
        job: Job,
        args: tuple[object, ...],
        plan: _Plan,
        trigger: object,
        first: datetime | None,
    ) -> None:
        self._plans[job_id] = plan
        options: dict[str, Any] = {} if first is None else {"next_run_time": first}
        self._aps.add_job(
            self._run,
            trigger,
            args=(job_id, plan, job, args),
            id=job_id,
            name=job_id,
            replace_existing=True,
            **options,
        )

    # -- control and inspection --------------------------------------------------

    def cancel(self, job_id: str) -> bool:
        """Remove the job's schedule (if not yet started) and cancel its run in flight
        (if running). True if anything was removed or cancelled."""
        removed = self._plans.pop(job_id, None) is not None
        try:
            self._aps.remove_job(job_id)
            removed = True
        except JobLookupError:
            pass
        run = self._running.get(job_id)
        if run is not None and not run.task.done():
            run.task.cancel()
            removed = True
        return removed

    def is_running(self, job_id: str) -> bool:
        return job_id in self._running

    async def wait_idle(self, job_id: str, timeout: float) -> bool:
        """Wait until no run of `job_id` is in flight; False if `timeout` s pass first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (run := self._running.get(job_id)) is not None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            done, _ = await asyncio.wait([run.task], timeout=remaining)
            if not done:
                return False
            # the loop goes on only when a newer run of the same id has started meanwhile
            if self._running.get(job_id) is run:
                return True
        return True

    def jobs(self) -> list[JobInfo]:
        """Scheduled and running jobs, one per id: running first, then by next run."""
        infos = {
            job_id: JobInfo(job_id, run.plan.kind, None, True, run.plan.description)
            for job_id, run in self._running.items()
        }
        for aps_job in self._aps.get_jobs():
            plan = self._plans.get(aps_job.id)
            if plan is None or aps_job.id in infos:
                continue
            next_run = getattr(aps_job, "next_run_time", None)
            infos[aps_job.id] = JobInfo(aps_job.id, plan.kind, next_run, False, plan.description)
        return sorted(infos.values(), key=_order)

    # -- the wrapper around every run --------------------------------------------

    async def _run(self, job_id: str, plan: _Plan, job: Job, args: tuple[object, ...]) -> None:
        if self._stopping or self._plans.get(job_id) is not plan:
            log.debug("background job %s skipped: cancelled or replaced", job_id)
            return
        if plan.kind == "once":
            del self._plans[job_id]
        if job_id in self._running:
            log.debug("background job %s skipped: its previous run is still going", job_id)
            return
        task = asyncio.current_task()
        assert task is not None  # APScheduler runs coroutine jobs as tasks
        run = _Run(task, plan)
        self._running[job_id] = run
        try:
            await job(self._context, *args)
        except asyncio.CancelledError:
            log.info("background job %s cancelled", job_id)
        except Exception:
            log.exception("background job %s failed", job_id)
        finally:
            if self._running.get(job_id) is run:
                del self._running[job_id]


def _now() -> datetime:
    return datetime.now(UTC)


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _order(info: JobInfo) -> tuple[bool, datetime, str]:
    return (not info.running, info.next_run or _FAR_FUTURE, info.id)

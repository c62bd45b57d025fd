"""The scheduler wrapper against the real APScheduler on the test's event loop.

Nothing here sleeps to wait: a test waits for an Event (or a polled condition) with
a timeout. The only `time.sleep` calls block the loop on purpose, to simulate a busy
process whose jobs fell due meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from gateway.scheduler import JobInfo, Scheduler
from tests.timing import scaled, wait_until

WAIT = 2.0  # generous bound for something that should happen within milliseconds


@dataclass
class Context:
    calls: list[tuple[object, ...]] = field(default_factory=list)
    ran: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
def ctx() -> Context:
    return Context()


@pytest.fixture
async def scheduler(ctx: Context) -> AsyncIterator[Scheduler[Context]]:
    sched = Scheduler(ctx)
    sched.start()
    yield sched
    await sched.shutdown(timeout=1.0)


async def until(condition: Callable[[], bool], timeout: float = WAIT) -> None:
    """Poll `condition` until it holds; fail the test after `scaled(timeout)` s."""
    await wait_until(condition, timeout, interval=0.005)


async def record(ctx: Context, *args: object) -> None:
    ctx.calls.append(args)
    ctx.ran.set()


async def hang_until_cancelled(ctx: Context, started: asyncio.Event, ended: asyncio.Event) -> None:
    started.set()
    try:
        await asyncio.Event().wait()
    finally:
        ended.set()


def apscheduler_complaints(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("apscheduler") and r.levelno >= logging.WARNING
    ]


async def test_once_runs_with_the_context_and_args(
    scheduler: Scheduler[Context], ctx: Context
) -> None:
    seen: list[object] = []

    async def job(given: Context, a: int, b: str) -> None:
        seen.append(given)
        await record(given, a, b)

    scheduler.once("greet", job, 1, "two", delay=0.01)
    await asyncio.wait_for(ctx.ran.wait(), scaled(WAIT))
    assert ctx.calls == [(1, "two")]
    assert len(seen) == 1 and seen[0] is ctx
    await until(lambda: scheduler.jobs() == [])


async def test_jobs_scheduled_before_start_run_after_it() -> None:
    ctx = Context()
    sched = Scheduler(ctx)
    sched.once("early", record, "x")
    assert [j.id for j in sched.jobs()] == ["early"]
    sched.start()
    try:
        await asyncio.wait_for(ctx.ran.wait(), scaled(WAIT))
        assert ctx.calls == [("x",)]
    finally:
        await sched.shutdown(timeout=1.0)


async def test_every_runs_repeatedly(scheduler: Scheduler[Context], ctx: Context) -> None:
    scheduler.every("tick", record, 0.02, "t", first_delay=0)
    await until(lambda: len(ctx.calls) >= 3)
    assert set(ctx.calls) == {("t",)}
    assert [(j.id, j.kind) for j in scheduler.jobs()] == [("tick", "every")]


async def test_every_refuses_a_non_positive_interval(scheduler: Scheduler[Context]) -> None:
    with pytest.raises(ValueError, match="interval must be positive"):
        scheduler.every("tick", record, 0)
    assert scheduler.jobs() == []


async def test_cron_is_listed_with_its_next_run(scheduler: Scheduler[Context]) -> None:
    scheduler.cron("nightly", record, "0 4 * * *")
    [info] = scheduler.jobs()
    assert (info.id, info.kind, info.running) == ("nightly", "cron", False)
    assert info.description == "cron 0 4 * * *"
    assert info.next_run is not None and info.next_run.utcoffset() is not None
    assert info.next_run > datetime.now(UTC)
    assert (info.next_run.hour, info.next_run.minute) == (4, 0)
    assert info.next_run.astimezone(UTC).hour == 4


@pytest.mark.parametrize("expression", ["0 4 * *", "61 * * * *", "every day", "* * * * * *"])
async def test_cron_refuses_a_bad_expression(
    scheduler: Scheduler[Context], expression: str
) -> None:
    with pytest.raises(ValueError) as raised:
        scheduler.cron("bad", record, expression)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"job bad: bad cron expression {expression!r}: ")
    assert raised.value.__cause__ is None
    assert scheduler.jobs() == []


async def test_cancel_removes_a_pending_job(scheduler: Scheduler[Context], ctx: Context) -> None:
    scheduler.once("doomed", record, "doomed", delay=0.05)
    assert scheduler.cancel("doomed") is True
    assert scheduler.cancel("doomed") is False
    assert scheduler.cancel("never-scheduled") is False
    scheduler.once("marker", record, "marker", delay=0.1)  # runs after doomed would have
    await asyncio.wait_for(ctx.ran.wait(), scaled(WAIT))
    assert ctx.calls == [("marker",)]


async def test_cancel_catches_a_run_already_due_but_not_started(
    scheduler: Scheduler[Context], ctx: Context
) -> None:
    scheduler.once("due", record, "due")
    # One yield lets the scheduler's wake-up submit the run (it leaves the job store)
    # while the run's task has not taken its first step yet: the window `cancel` covers.
    await asyncio.sleep(0)
    assert scheduler.jobs() == [] and not scheduler.is_running("due")
    assert scheduler.cancel("due") is True
    scheduler.once("marker", record, "marker", delay=0.05)
    await asyncio.wait_for(ctx.ran.wait(), scaled(WAIT))
    assert ctx.calls == [("marker",)]


async def test_cancel_stops_a_running_job(
    scheduler: Scheduler[Context], ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    started, ended = asyncio.Event(), asyncio.Event()
    scheduler.once("review:1", hang_until_cancelled, started, ended)
    await asyncio.wait_for(started.wait(), scaled(WAIT))
    assert scheduler.is_running("review:1")
    assert scheduler.cancel("review:1") is True
    await asyncio.wait_for(ended.wait(), scaled(WAIT))
    assert await scheduler.wait_idle("review:1", WAIT) is True
    assert not scheduler.is_running("review:1")
    assert "background job review:1 cancelled" in caplog.messages
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # the scheduler still runs jobs afterwards
    scheduler.once("after", record, "after")
    await asyncio.wait_for(ctx.ran.wait(), scaled(WAIT))


async def test_a_failing_job_is_logged_and_others_keep_running(
    scheduler: Scheduler[Context], ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    async def boom(ctx: Context) -> None:
        raise RuntimeError("model hung up")

    scheduler.every("flaky", boom, 0.02, first_delay=0)
    await until(lambda: "background job flaky failed" in caplog.messages)
    [failure, *_] = [r for r in caplog.records if r.getMessage() == "background job flaky failed"]
    assert failure.levelno == logging.ERROR
    assert failure.exc_info is not None and isinstance(failure.exc_info[1], RuntimeError)
    assert "model hung up" in caplog.text and "Traceback" in caplog.text
    scheduler.once("fine", record, "fine")
    await asyncio.wait_for(ctx.ran.wait(), scaled(WAIT))
    # flaky is still scheduled and fails again: nothing reached APScheduler
    count = caplog.messages.count("background job flaky failed")
    await until(lambda: caplog.messages.count("background job flaky failed") > count)
    assert not [r for r in caplog.records if r.name.startswith("apscheduler") and r.exc_info]


async def test_shutdown_waits_for_a_short_job_and_cancels_a_hung_one() -> None:
    ctx = Context()
    sched = Scheduler(ctx)
    sched.start()
    finished = asyncio.Event()

    async def short(ctx: Context, started: asyncio.Event) -> None:
        started.set()
        await asyncio.sleep(0.05)  # the job's own work, a little longer than nothing
        finished.set()

    short_started, hung_started, hung_ended = asyncio.Event(), asyncio.Event(), asyncio.Event()
    sched.once("short", short, short_started)
    sched.once("hung", hang_until_cancelled, hung_started, hung_ended)
    sched.once("later", record, "later", delay=60)
    await asyncio.wait_for(asyncio.gather(short_started.wait(), hung_started.wait()), scaled(WAIT))

    began = time.monotonic()
    cancelled = await sched.shutdown(timeout=0.3)
    took = time.monotonic() - began

    assert cancelled == ["hung"]
    assert finished.is_set() and hung_ended.is_set()
    assert 0.3 <= took < 0.3 + scaled(WAIT)
    assert not sched.is_running("short") and not sched.is_running("hung")
    assert ctx.calls == []  # "later" never runs


async def test_second_start_and_shutdown_are_harmless() -> None:
    ctx = Context()
    sched = Scheduler(ctx)
    assert await Scheduler(Context()).shutdown(timeout=0.1) == []  # never started
    sched.start()
    sched.start()
    sched.once("x", record, "x")
    await asyncio.wait_for(ctx.ran.wait(), scaled(WAIT))
    assert await sched.shutdown(timeout=0.1) == []
    assert await sched.shutdown(timeout=0.1) == []
    sched.start()  # after shutdown: nothing happens, nothing raises


async def test_jobs_shows_kind_next_run_and_running(scheduler: Scheduler[Context]) -> None:
    started, ended = asyncio.Event(), asyncio.Event()
    scheduler.cron("nightly", record, "0 4 * * *")
    scheduler.every("idle-scan", record, 300)
    scheduler.once("soon", record, delay=60)
    scheduler.once("busy", hang_until_cancelled, started, ended)
    await asyncio.wait_for(started.wait(), scaled(WAIT))

    infos = scheduler.jobs()
    assert infos[0] == JobInfo("busy", "once", None, True, infos[0].description)
    assert infos[0].description.startswith("once at ") and infos[0].description.endswith("Z")
    rest = {i.id: i for i in infos[1:]}
    assert [i.id for i in infos[1:3]] == ["soon", "idle-scan"]  # by next run
    assert rest["idle-scan"].description == "every 300 s"
    assert rest["nightly"].description == "cron 0 4 * * *"
    assert {i.kind for i in rest.values()} == {"once", "every", "cron"}
    now = datetime.now(UTC)
    for info in rest.values():
        assert not info.running
        assert info.next_run is not None and info.next_run.utcoffset() is not None
        assert info.next_run > now
    nexts = [i.next_run for i in infos[1:]]
    assert nexts == sorted(n for n in nexts if n is not None)
    assert scheduler.cancel("busy")
    await asyncio.wait_for(ended.wait(), scaled(WAIT))


async def test_runs_of_one_id_never_overlap(
    scheduler: Scheduler[Context], ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    release = asyncio.Event()
    active = 0
    most = 0
    runs = 0

    async def slow(ctx: Context) -> None:
        nonlocal active, most, runs
        active += 1
        runs += 1
        most = max(most, active)
        try:
            await release.wait()
        finally:
            active -= 1

    def skips() -> int:
        return sum("still going" in m for m in caplog.messages)

    scheduler.every("slow", slow, 0.02, first_delay=0)
    await until(lambda: skips() >= 3)
    assert runs == 1
    release.set()
    await until(lambda: runs >= 2)
    assert most == 1
    assert apscheduler_complaints(caplog) == []


async def test_once_again_while_running_is_skipped_not_overlapped(
    scheduler: Scheduler[Context],
    ctx: Context,
) -> None:
    started, ended = asyncio.Event(), asyncio.Event()
    scheduler.once("same", hang_until_cancelled, started, ended)
    await asyncio.wait_for(started.wait(), scaled(WAIT))
    scheduler.once("same", record, "second")
    await until(lambda: [j.id for j in scheduler.jobs() if not j.running] == [])
    assert ctx.calls == []
    assert scheduler.is_running("same")
    assert scheduler.cancel("same")
    await asyncio.wait_for(ended.wait(), scaled(WAIT))


async def test_a_newer_once_replaces_one_not_yet_started(
    scheduler: Scheduler[Context], ctx: Context
) -> None:
    scheduler.once("review:7", record, "old", delay=0.05)
    scheduler.once("review:7", record, "new", delay=0.05)
    assert len(scheduler.jobs()) == 1
    await asyncio.wait_for(ctx.ran.wait(), scaled(WAIT))
    await until(lambda: scheduler.jobs() == [])
    assert ctx.calls == [("new",)]


async def test_wait_idle_times_out_while_a_run_is_in_flight(scheduler: Scheduler[Context]) -> None:
    started, ended = asyncio.Event(), asyncio.Event()
    assert await scheduler.wait_idle("nothing", 0.01) is True
    scheduler.once("long", hang_until_cancelled, started, ended)
    await asyncio.wait_for(started.wait(), scaled(WAIT))
    assert await scheduler.wait_idle("long", 0.05) is False
    scheduler.cancel("long")
    assert await scheduler.wait_idle("long", WAIT) is True


async def test_a_run_due_while_the_loop_was_blocked_still_runs(
    scheduler: Scheduler[Context], ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    # APScheduler's default grace is 1 s: a run later than that would be skipped.
    scheduler.once("late", record, "late", delay=0.05)
    time.sleep(1.1)  # blocks the loop on purpose: the run falls due and is missed by ~1 s
    await asyncio.wait_for(ctx.ran.wait(), scaled(WAIT))
    assert ctx.calls == [("late",)]
    assert apscheduler_complaints(caplog) == []


async def test_a_periodic_job_missed_several_times_runs_once(
    scheduler: Scheduler[Context],
    ctx: Context,
) -> None:
    scheduler.every("tick", record, 0.05, "t", first_delay=0)
    await asyncio.wait_for(ctx.ran.wait(), scaled(WAIT))
    before = len(ctx.calls)
    ctx.ran.clear()
    time.sleep(0.6)  # about twelve runs fall due while the loop is blocked
    await asyncio.wait_for(ctx.ran.wait(), scaled(WAIT))
    # without coalescing the whole backlog runs in one go, before this line
    assert len(ctx.calls) == before + 1

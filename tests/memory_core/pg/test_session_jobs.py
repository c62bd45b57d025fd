"""The job queue's contract, on PostgreSQL and in process: one open job per kind and key,
claims that never overlap, a lease that another owner takes over once it runs out.

Times are the queue's (on PostgreSQL the server's clock), so the callers give only
durations; a lease or delay that must run out is a fraction of a second, and the
tests poll the queue until it has (on both backends, real time passes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from memory_core.pg.database import PgDatabase
from memory_core.pg.fence import FENCE_MIGRATIONS
from memory_core.pg.session_jobs import JOB_MIGRATIONS, PgJobQueue
from memory_core.sessions import ClaimedJob, InProcessJobs, JobQueue, JobRequest
from tests.timing import scaled, wait_until


@pytest.fixture(params=["postgresql", "in-process"])
async def queue(request: pytest.FixtureRequest) -> AsyncIterator[JobQueue]:
    if request.param == "in-process":
        yield InProcessJobs()
        return
    url = request.getfixturevalue("pg_database")
    async with PgDatabase(url, max_size=4) as db:
        await db.migrate((*JOB_MIGRATIONS, *FENCE_MIGRATIONS))
        yield PgJobQueue(db)


def extraction(session_id: int, user: str = "telegram-a", delay: float = 0.0) -> JobRequest:
    return JobRequest("extract", str(session_id), user, '{"ending": true}', 7, delay)


async def eventually(claim: Callable[[], Awaitable[list[ClaimedJob]]]) -> list[ClaimedJob]:
    """What `claim()` takes once it takes something (within a generous deadline)."""
    return await wait_until(claim, 20.0, "something claimable", interval=0.02)


async def test_one_open_job_per_kind_and_key(queue: JobQueue) -> None:
    assert await queue.enqueue(extraction(1))
    assert not await queue.enqueue(extraction(1, delay=50.0))  # open: nothing added
    assert await queue.enqueue(JobRequest("review", "1"))  # another kind, same key
    [job] = await queue.claim("a", 60.0, 1)
    assert (job.kind, job.key, job.payload, job.mark, job.attempts) == (
        "extract", "1", '{"ending": true}', 7, 1
    )  # fmt: skip
    assert not await queue.enqueue(extraction(1))  # running is open too
    assert await queue.finish(job.id, "a")
    assert await queue.enqueue(extraction(1))  # closed: the next one may open
    assert [(j.kind, j.key) for j in await queue.open_jobs()] == [("review", "1"), ("extract", "1")]


async def test_a_job_not_due_or_held_is_not_claimed(queue: JobQueue) -> None:
    await queue.enqueue(extraction(1, delay=0.3))
    assert await queue.claim("a", 60.0, 5) == []  # due in 0.3 s
    [job] = await eventually(lambda: queue.claim("a", 0.5, 5))
    assert await queue.renew(job.id, "a", 60.0)  # held a minute from now
    await asyncio.sleep(0.6)  # past the first lease: the renewal is what holds it
    assert await queue.claim("b", 60.0, 5) == []


async def test_a_lapsed_lease_is_taken_over_and_the_old_holder_refused(queue: JobQueue) -> None:
    await queue.enqueue(extraction(1))
    [held] = await queue.claim("dead", 0.3, 5)
    assert await queue.claim("alive", 60.0, 5) == []  # the lease holds for now
    [taken] = await eventually(lambda: queue.claim("alive", 60.0, 5))
    assert (taken.id, taken.attempts) == (held.id, 2)
    assert taken.lease_until - held.lease_until > 59.0
    assert not await queue.renew(held.id, "dead", 60.0)
    assert not await queue.finish(held.id, "dead")
    assert not await queue.release(held.id, "dead")
    assert await queue.finish(taken.id, "alive")
    assert await queue.open_jobs() == []


async def test_a_released_job_is_due_again_at_its_time(queue: JobQueue) -> None:
    await queue.enqueue(JobRequest("sweep", "quiet"))
    [job] = await queue.claim("a", 60.0, 5)
    assert await queue.release(job.id, "a", 0.3)
    assert await queue.claim("b", 60.0, 5) == []
    [again] = await eventually(lambda: queue.claim("b", 60.0, 5))
    assert again.id == job.id and again.attempts == 2
    assert await queue.release(again.id, "b")  # no delay: due at once
    [third] = await queue.claim("a", 60.0, 5)
    assert third.attempts == 3


async def test_cancel_and_forget_stop_the_holder(queue: JobQueue) -> None:
    await queue.enqueue(JobRequest("review", "k", "telegram-a"))
    await queue.enqueue(extraction(2, user="telegram-b"))
    await queue.enqueue(extraction(3, user="telegram-a"))
    jobs = {job.key: job for job in await queue.claim("a", 60.0, 5)}
    assert await queue.cancel("review", "k") == 1
    assert not await queue.renew(jobs["k"].id, "a", 60.0)  # the holder stops
    assert await queue.forget_person("telegram-a") == 2  # the cancelled review and job 3
    assert not await queue.finish(jobs["3"].id, "a")
    assert [job.key for job in await queue.open_jobs()] == ["2"]
    assert await queue.finish(jobs["2"].id, "a")
    assert await queue.prune(60.0) == 0  # done just now: kept a while

    async def pruned() -> bool:
        return await queue.prune(0.05) > 0  # done longer ago than that: gone

    await wait_until(pruned, 20.0, "the done job pruned", interval=0.02)


async def test_owners_claiming_at_once_get_disjoint_jobs(queue: JobQueue) -> None:
    for session_id in range(40):
        await queue.enqueue(extraction(session_id))

    async def owner(name: str) -> list[int]:
        taken: list[int] = []
        while batch := await queue.claim(name, 60.0, 3):
            taken += [job.id for job in batch]
            await asyncio.sleep(0)
        return taken

    lists = await asyncio.gather(*(owner(f"replica-{i}") for i in range(3)))
    every = [job_id for taken in lists for job_id in taken]
    assert sorted(every) == sorted({job.id for job in await queue.open_jobs()})
    assert len(every) == 40 == len(set(every))


async def test_a_claim_skips_a_row_another_claim_has_locked_without_waiting(
    pg_database: str,
) -> None:
    async with PgDatabase(pg_database, max_size=4) as db:
        await db.migrate((*JOB_MIGRATIONS, *FENCE_MIGRATIONS))
        queue = PgJobQueue(db)
        for session_id in (1, 2):
            await queue.enqueue(extraction(session_id))
        async with db.transaction() as slow:  # a claim stuck between its pick and commit
            cur = await slow.execute(b"SELECT id FROM jobs WHERE job_key = '1' FOR UPDATE")
            (locked,) = await cur.fetchone() or (None,)
            claimed = await asyncio.wait_for(queue.claim("fast", 60.0, 5), timeout=scaled(2.0))
            assert [job.key for job in claimed] == ["2"]
        [later] = await queue.claim("fast", 60.0, 5)  # once the slow one let go
        assert later.id == locked

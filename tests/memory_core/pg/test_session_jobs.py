"""The job queue's contract, on PostgreSQL and in process: one open job per kind and key,
claims that never overlap, a lease that another owner takes over once it runs out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from memory_core.pg.database import PgDatabase
from memory_core.pg.session_jobs import JOB_MIGRATIONS, PgJobQueue
from memory_core.sessions import InProcessJobs, JobQueue, JobRequest


@pytest.fixture(params=["postgresql", "in-process"])
async def queue(request: pytest.FixtureRequest) -> AsyncIterator[JobQueue]:
    if request.param == "in-process":
        yield InProcessJobs()
        return
    url = request.getfixturevalue("pg_database")
    async with PgDatabase(url, max_size=4) as db:
        await db.migrate(JOB_MIGRATIONS)
        yield PgJobQueue(db)


def extraction(session_id: int, due: float = 100.0, user: str = "telegram-a") -> JobRequest:
    return JobRequest("extract", str(session_id), due, user, '{"ending": true}', 7)


async def test_one_open_job_per_kind_and_key(queue: JobQueue) -> None:
    assert await queue.enqueue(extraction(1))
    assert not await queue.enqueue(extraction(1, due=50.0))  # open: nothing added
    assert await queue.enqueue(JobRequest("review", "1", 100.0))  # another kind, same key
    [job] = await queue.claim("a", 100.0, 60.0, 1)
    assert (job.kind, job.key, job.payload, job.mark, job.attempts) == (
        "extract", "1", '{"ending": true}', 7, 1
    )  # fmt: skip
    assert not await queue.enqueue(extraction(1))  # running is open too
    assert await queue.finish(job.id, "a", 101.0)
    assert await queue.enqueue(extraction(1))  # closed: the next one may open
    assert [(j.kind, j.key) for j in await queue.open_jobs()] == [("review", "1"), ("extract", "1")]


async def test_a_job_not_due_or_held_is_not_claimed(queue: JobQueue) -> None:
    await queue.enqueue(extraction(1, due=200.0))
    assert await queue.claim("a", 199.0, 60.0, 5) == []
    [job] = await queue.claim("a", 200.0, 60.0, 5)
    assert await queue.claim("b", 259.0, 60.0, 5) == []  # a's lease holds until 260
    assert await queue.renew(job.id, "a", 250.0, 60.0)  # now until 310
    assert await queue.claim("b", 300.0, 60.0, 5) == []


async def test_a_lapsed_lease_is_taken_over_and_the_old_holder_refused(queue: JobQueue) -> None:
    await queue.enqueue(extraction(1))
    [held] = await queue.claim("dead", 100.0, 60.0, 5)
    [taken] = await queue.claim("alive", 161.0, 60.0, 5)
    assert (taken.id, taken.attempts, taken.lease_until) == (held.id, 2, 221.0)
    assert not await queue.renew(held.id, "dead", 162.0, 60.0)
    assert not await queue.finish(held.id, "dead", 162.0)
    assert not await queue.release(held.id, "dead", 162.0)
    assert await queue.finish(taken.id, "alive", 170.0)
    assert await queue.open_jobs() == []


async def test_a_released_job_is_due_again_at_its_time(queue: JobQueue) -> None:
    await queue.enqueue(JobRequest("sweep", "quiet", 100.0))
    [job] = await queue.claim("a", 100.0, 60.0, 5)
    assert await queue.release(job.id, "a", 400.0)
    assert await queue.claim("b", 399.0, 60.0, 5) == []
    [again] = await queue.claim("b", 400.0, 60.0, 5)
    assert again.id == job.id and again.attempts == 2


async def test_cancel_and_forget_stop_the_holder(queue: JobQueue) -> None:
    await queue.enqueue(JobRequest("review", "k", 100.0, "telegram-a"))
    await queue.enqueue(extraction(2, user="telegram-b"))
    await queue.enqueue(extraction(3, user="telegram-a"))
    jobs = {job.key: job for job in await queue.claim("a", 100.0, 60.0, 5)}
    assert await queue.cancel("review", "k", 101.0) == 1
    assert not await queue.renew(jobs["k"].id, "a", 102.0, 60.0)  # the holder stops
    assert await queue.forget_person("telegram-a") == 2  # the cancelled review and job 3
    assert not await queue.finish(jobs["3"].id, "a", 103.0)
    assert [job.key for job in await queue.open_jobs()] == ["2"]
    assert await queue.finish(jobs["2"].id, "a", 104.0)
    assert await queue.prune(104.0) == 0  # done at 104: kept until later
    assert await queue.prune(105.0) == 1


async def test_owners_claiming_at_once_get_disjoint_jobs(queue: JobQueue) -> None:
    for session_id in range(40):
        await queue.enqueue(extraction(session_id))

    async def owner(name: str) -> list[int]:
        taken: list[int] = []
        while batch := await queue.claim(name, 100.0, 60.0, 3):
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
        await db.migrate(JOB_MIGRATIONS)
        queue = PgJobQueue(db)
        for session_id in (1, 2):
            await queue.enqueue(extraction(session_id))
        async with db.transaction() as slow:  # a claim stuck between its pick and commit
            cur = await slow.execute(b"SELECT id FROM jobs WHERE job_key = '1' FOR UPDATE")
            (locked,) = await cur.fetchone() or (None,)
            claimed = await asyncio.wait_for(queue.claim("fast", 100.0, 60.0, 5), timeout=2.0)
            assert [job.key for job in claimed] == ["2"]
        [later] = await queue.claim("fast", 100.0, 60.0, 5)  # once the slow one let go
        assert later.id == locked

"""A background job is closed only once its work committed: a review failed by the database
being away is given back and runs again later, at most `MAX_ATTEMPTS` times.

The queue is the in-process one on a clock the test moves (the retry is due
`RETRY_SECONDS` per attempt later); the session store the jobs see fails its
first reads with `PostgresUnavailableError`, as a store whose server went away does.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from gateway.app import job_context, open_services
from gateway.jobs import BackgroundWork, ReviewRequest
from gateway.jobs.claims import MAX_ATTEMPTS, RETRY_SECONDS, REVIEW, review_payload
from gateway.jobs.review import REVIEW_PROMPT
from gateway.messages import InboundMessage
from memory_core import PostgresUnavailableError
from memory_core.sessions import InProcessJobs, JobRequest, OpenJob
from tests.clock import Clock
from tests.fakes.openai import FakeOpenAI
from tests.gateway.jobs.conftest import bot_config, message, wait_for
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink


class AwayAtFirst:
    """The session store, whose first `failures` reads of a session fail as an outage."""

    def __init__(self, store: Any, failures: int) -> None:
        self._store = store
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def get_session(self, session_id: int) -> Any:
        if self.failures > 0:
            self.failures -= 1
            raise PostgresUnavailableError("no connection to PostgreSQL: the server went away")
        return await self._store.get_session(session_id)


@dataclasses.dataclass
class Setup:
    work: BackgroundWork
    queue: InProcessJobs
    clock: Clock
    sessions: AwayAtFirst


@contextlib.asynccontextmanager
async def flaky_bot(fake: FakeOpenAI, home: Path, failures: int) -> AsyncIterator[Setup]:
    """A bot whose background jobs meet `failures` outages; Alice has said one thing."""
    config = bot_config(fake, home, memory={"nudge_interval": 0})
    async with open_services(config) as services:

        async def notify(to: InboundMessage, text: str) -> None:
            pass

        clock = Clock(1_800_000_000.0)
        queue = InProcessJobs(clock)
        flaky = AwayAtFirst(services.sessions, failures)
        context = dataclasses.replace(job_context(services, notify), sessions=flaky)
        work = BackgroundWork(context, queue, renew_seconds=0.05)
        conversations = serving(services, background=work)
        work.start(conversations.sessions.end_quiet)
        fake.say("Noted.")
        await conversations.handle(message("I'm a nurse"), ListSink())
        try:
            yield Setup(work, queue, clock, flaky)
        finally:
            await work.close()
            await conversations.close()


async def ask_review(setup: Setup) -> None:
    session = await setup.work.context.sessions.current_session(message("").session_key())
    payload = review_payload(ReviewRequest(session.id, message("")))
    key = session.session_key
    await setup.queue.enqueue(JobRequest(REVIEW, key, "telegram-alice", payload))
    await setup.work.claim_due()


async def open_review(setup: Setup) -> list[OpenJob]:
    await setup.work.context.sessions.flush(5.0)
    return [job for job in await setup.queue.open_jobs() if job.kind == REVIEW]


def reviews(fake: FakeOpenAI) -> int:
    return sum(
        1
        for r in fake.requests
        if r.body and any(m.get("content") == REVIEW_PROMPT for m in r.body["messages"])
    )


async def settled(setup: Setup, attempts: int) -> list[OpenJob]:
    """The open review once its run `attempts` has settled (waits for it)."""

    async def ready() -> bool:
        jobs = await open_review(setup)
        return not jobs or (jobs[0].attempts == attempts and jobs[0].lease_owner is None)

    await wait_for(ready, timeout=20.0)
    return await open_review(setup)


async def test_a_review_failed_by_an_outage_runs_again_later(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    async with flaky_bot(fake, tmp_path, failures=1) as setup:
        fake.say("Nothing to save.")
        await ask_review(setup)
        [job] = await settled(setup, attempts=1)  # given back, not closed
        assert job.due_at == setup.clock.now + RETRY_SECONDS
        assert reviews(fake) == 0
        await setup.work.claim_due()
        assert [j.attempts for j in await open_review(setup)] == [1]  # not due yet
        setup.clock.now += RETRY_SECONDS
        await setup.work.claim_due()
        assert await settled(setup, attempts=2) == []  # ran, and closed
        assert reviews(fake) == 1 and setup.sessions.failures == 0


async def test_a_review_that_keeps_failing_is_closed_after_its_attempts(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    async with flaky_bot(fake, tmp_path, failures=100) as setup:
        await ask_review(setup)
        for attempt in range(1, MAX_ATTEMPTS):
            [job] = await settled(setup, attempts=attempt)
            setup.clock.now = job.due_at
            await setup.work.claim_due()
        assert await settled(setup, attempts=MAX_ATTEMPTS) == []
        assert setup.sessions.failures == 100 - MAX_ATTEMPTS and reviews(fake) == 0

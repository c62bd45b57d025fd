"""Background work claimed once across replicas: two bots' `BackgroundWork` over one
PostgreSQL database, each its own stores, pools and scheduler, as two `mnemo run` are."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.app import Services, job_context, open_services
from gateway.conversation import Conversations
from gateway.jobs import BackgroundWork, ReviewRequest
from gateway.jobs.claims import review_payload, review_request
from gateway.jobs.extraction import EXTRACTION_SYSTEM
from gateway.jobs.review import REVIEW_PROMPT
from gateway.messages import InboundMessage
from memory_core import NewMessage, SessionOrigin, current_mark
from memory_core.sessions import JobRequest
from tests.clock import Clock
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault
from tests.gateway.jobs.conftest import bot_config, message, wait_for
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink

# both replicas' wall clock starts here (the jobs' leases and due times are the database's)
START = 1_800_000_000.0


@dataclass
class Replica:
    services: Services
    conversations: Conversations
    work: BackgroundWork

    async def say(self, text: str, user: str = "alice") -> str:
        sink = ListSink()
        await self.conversations.handle(message(text, user), sink)
        return sink.replies[-1]


@contextlib.asynccontextmanager
async def replica(
    fake: FakeOpenAI, home: Path, url: str, clock: Clock, name: str, **sections: Any
) -> AsyncIterator[Replica]:
    """One replica on `url`, its background work started (its first sweep asked for)."""
    config = bot_config(fake, home, storage={"url": url}, **sections)
    async with open_services(config) as services:

        async def notify(to: InboundMessage, text: str) -> None:
            pass

        context = job_context(services, notify)
        settings = dataclasses.replace(context.settings, sweep_seconds=3600.0, shutdown_grace=2.0)
        context = dataclasses.replace(context, settings=settings, clock=clock)
        work = BackgroundWork(context, services.jobs, owner=name, renew_seconds=0.05)
        conversations = serving(services, background=work)
        work.start(conversations.sessions.end_quiet)
        try:
            yield Replica(services, conversations, work)
        finally:
            await work.close()
            await conversations.close()


def requests_of(fake: FakeOpenAI, system: str) -> int:
    return sum(
        1
        for r in fake.requests
        if r.body and any(m.get("content") == system for m in r.body["messages"])
    )


async def ended_session(services: Services, user: str = "alice") -> int:
    """A session of four texts that ended (its extraction due), stored directly."""
    inbound = message("", user)
    origin = SessionOrigin(
        session_key=inbound.session_key(),
        source="telegram",
        user_key=inbound.user_key,
        chat_id=user,
        chat_type="private",
    )
    texts = ["hi", "Hi!", "my cat is called Miso", "Lovely name."]
    messages = [
        NewMessage(role=("user", "assistant")[i % 2], content=t, timestamp=START - 600 + i, key=t)
        for i, t in enumerate(texts)
    ]
    result = await services.sessions.append_messages(origin=origin, messages=messages)
    await services.sessions.end_session(result.session_id, "new")
    return result.session_id


async def nothing_due(r: Replica) -> bool:
    return not await r.services.sessions.pending_extractions()


async def only_the_sweep_open(r: Replica) -> bool:
    jobs = await r.work.queue.open_jobs()
    return [(j.kind, j.lease_owner) for j in jobs] == [("sweep", None)]


async def test_a_due_extraction_runs_once_when_two_replicas_start_together(
    fake: FakeOpenAI, tmp_path: Path, pg_database: str
) -> None:
    clock = Clock(START)
    config = bot_config(fake, tmp_path / "setup", storage={"url": pg_database})
    async with open_services(config) as services:
        await ended_session(services)
    fake.fail_next(Fault.stall())  # the extraction hangs while both replicas claim
    fake.say("Nothing to save.")
    async with (
        replica(fake, tmp_path / "a", pg_database, clock, "a") as a,
        replica(fake, tmp_path / "b", pg_database, clock, "b") as b,
    ):
        await wait_until(lambda: fake.stalled == 1)
        for r in (a, b, a, b):  # every replica asks again and claims: nothing more runs
            await r.work.ask_extraction(1, "telegram-alice", ending=True)
            await r.work.claim_due()
        fake.release()
        await wait_for(lambda: nothing_due(a))
        await wait_for(lambda: only_the_sweep_open(b))
        for r in (b, a):
            await r.work.claim_due()
    assert requests_of(fake, EXTRACTION_SYSTEM) == 1


async def test_a_dead_replicas_extraction_is_taken_over_once_its_lease_ran_out(
    fake: FakeOpenAI, tmp_path: Path, pg_database: str
) -> None:
    clock = Clock(START)
    fake.say("Nothing to save.")
    async with replica(fake, tmp_path / "b", pg_database, clock, "b") as b:
        await wait_for(lambda: only_the_sweep_open(b))  # the start-up sweep: nothing due yet
        session_id = await ended_session(b.services)
        dead = JobRequest("extract", str(session_id), "telegram-alice", "", current_mark())
        await b.work.queue.enqueue(dead)
        [held] = await b.work.queue.claim("dead", 1.0, 5)  # and then it died
        await b.work.ask_extraction(session_id, "telegram-alice", ending=True)
        await b.work.claim_due()
        assert requests_of(fake, EXTRACTION_SYSTEM) == 0  # the dead one's lease holds

        async def taken_over() -> bool:
            await b.work.claim_due()  # as the periodic claim would, once the lease ran out
            return await nothing_due(b)

        await wait_for(taken_over, timeout=20.0)
        await wait_for(lambda: only_the_sweep_open(b))
        assert not await b.work.queue.finish(held.id, "dead")
    assert requests_of(fake, EXTRACTION_SYSTEM) == 1


async def test_a_review_runs_once_whichever_replica_replies(
    fake: FakeOpenAI, tmp_path: Path, pg_database: str
) -> None:
    clock = Clock(START)
    memory = {"nudge_interval": 1}
    fake.say("Noted.")
    async with (
        replica(fake, tmp_path / "a", pg_database, clock, "a", memory=memory) as a,
        replica(fake, tmp_path / "b", pg_database, clock, "b", memory=memory) as b,
    ):
        fake.say("Nothing to save.")
        assert await a.say("I'm a nurse") == "Noted."
        fake.fail_next(Fault.stall())  # a's review, asked for by the reply, hangs
        await wait_until(lambda: fake.stalled == 1)
        session = await b.services.sessions.current_session(message("").session_key())
        assert session is not None
        for _ in range(2):  # b replies in that session too, while a's review runs
            await b.work.after_reply(session.session_key or "", session.id, message("x"))
            await b.work.claim_due()
        fake.release()
        await wait_for(lambda: only_the_sweep_open(b))
        await b.work.after_reply(session.session_key or "", session.id, message("x"))
        assert await only_the_sweep_open(b)  # the counters were reset: no review is due
    assert requests_of(fake, REVIEW_PROMPT) == 1


async def test_a_message_on_one_replica_stops_the_review_running_on_another(
    fake: FakeOpenAI, tmp_path: Path, pg_database: str
) -> None:
    clock = Clock(START)
    memory = {"nudge_interval": 1}
    fake.say("Noted.")
    async with (
        replica(fake, tmp_path / "a", pg_database, clock, "a", memory=memory) as a,
        replica(fake, tmp_path / "b", pg_database, clock, "b", memory=memory) as b,
    ):
        await a.say("I'm a nurse")
        fake.fail_next(Fault.stall())
        fake.say("Nothing to save.")  # what the stalled request gets, once released
        await wait_until(lambda: fake.stalled == 1)
        b.work.message_arrived(message("").session_key())
        await wait_until(lambda: not any(j.id.startswith("review:") for j in a.work.jobs()))
        fake.release()
        assert await only_the_sweep_open(a)


def test_a_review_row_keeps_the_chat_and_not_the_words() -> None:
    said = dataclasses.replace(message("my password is hunter2"), user_name="Alice Smith")
    payload = review_payload(ReviewRequest(7, said))
    back = review_request(payload)
    assert "hunter2" not in payload and "Alice Smith" not in payload
    assert back.session_id == 7 and back.message.session_key() == said.session_key()
    assert (back.message.chat_id, back.message.user_key) == (said.chat_id, said.user_key)

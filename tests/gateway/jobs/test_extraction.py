"""Extraction when a session ends or goes quiet, and pending extraction across a restart."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gateway.jobs.background import sweep
from gateway.jobs.extraction import EXTRACTION_SYSTEM, MESSAGE_CHARS, extract_session
from memory_core import NewMessage, SessionOrigin
from tests.clock import Clock
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall, Turn
from tests.gateway.jobs.conftest import Bot, bot_config, message, running_bot, wait_for

MISO = ToolCall("memory", {"target": "user", "action": "add", "content": "Has a cat named Miso"})


def extraction_requests(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [
        r.body
        for r in fake.requests
        if r.body and r.body["messages"][0].get("content") == EXTRACTION_SYSTEM
    ]


async def chat_about_miso(fake: FakeOpenAI, bot: Bot) -> None:
    """Two exchanges (four texts: enough to extract), then the extraction's script."""
    fake.say("Hi Alice!")
    fake.say("Miso is a lovely name.")
    await bot.say("hi")
    await bot.say("my cat is called Miso")
    fake.call_tools(MISO)
    fake.say("Saved.")


async def extracted_to_end(bot: Bot, session_id: int) -> bool:
    done = await bot.services.sessions.extraction_progress(session_id)
    messages = await bot.transcript(session_id)
    return done == messages[-1].id


async def no_extraction_running(bot: Bot) -> bool:
    return not any(job.id.startswith("extract:") for job in bot.background.jobs())


async def test_a_quiet_session_is_extracted_once_and_stays_open(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    clock = Clock(time.time())
    config = bot_config(fake, tmp_path / "data")
    async with running_bot(config, clock=clock, sweep_seconds=0.05) as bot:
        await chat_about_miso(fake, bot)
        session = await bot.session()
        clock.now += 121 * 60  # quiet for longer than sessions.idle_minutes (120)
        await wait_for(lambda: extracted_to_end(bot, session.id))
        await wait_for(lambda: no_extraction_running(bot))  # its job ends after the mark
        await sweep(bot.background.context, bot.background)  # and again: nothing more to do
        await sweep(bot.background.context, bot.background)
        still_open = await bot.session()
        quiet = await bot.services.sessions.quiet_sessions(clock.now)
        jobs = [job.id for job in bot.background.jobs()]
    assert await bot.user_entries() == ("Has a cat named Miso",)
    assert still_open is not None and still_open.id == session.id
    assert len(extraction_requests(fake)) == 2  # the tool call and its closing reply
    transcript = extraction_requests(fake)[0]["messages"][1]["content"]
    assert "my cat is called Miso" in transcript and "Miso is a lovely name." in transcript
    assert quiet == []
    assert not any(job.startswith("extract:") for job in jobs)


async def test_with_idle_reset_a_quiet_session_ends_and_the_next_one_is_linked(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    clock = Clock(time.time())
    config = bot_config(fake, tmp_path / "data", sessions={"idle_reset": True})
    async with running_bot(config, clock=clock, sweep_seconds=0.05) as bot:
        await chat_about_miso(fake, bot)
        old = await bot.session()
        clock.now += 121 * 60

        async def ended_and_extracted() -> bool:
            pending = await bot.services.sessions.pending_extractions()
            return await bot.session() is None and not pending and bool(await bot.user_entries())

        await wait_for(ended_and_extracted)
        ended = await bot.services.sessions.get_session(old.id)
        # The person is back now: the sweep's clock returns to the time turns stamp
        # their messages with, or the new session would look two hours quiet and a
        # sweep could end it before the test looks (seen on a loaded machine).
        clock.now = time.time()
        fake.say("Welcome back.")
        assert await bot.say("back again") == "Welcome back."
        new = await bot.session()
    assert ended is not None and ended.end_reason == "idle"
    assert new is not None and new.id != old.id
    assert new.parent_session_id == old.id
    assert await bot.user_entries() == ("Has a cat named Miso",)


async def test_a_session_that_ends_with_new_is_extracted(fake: FakeOpenAI, tmp_path: Path) -> None:
    async with running_bot(bot_config(fake, tmp_path / "data")) as bot:
        await chat_about_miso(fake, bot)
        old = await bot.session()
        await bot.say("/new")

        async def done() -> bool:
            return not await bot.services.sessions.pending_extractions()

        await wait_for(done)
        ended = await bot.services.sessions.get_session(old.id)
    assert await bot.user_entries() == ("Has a cat named Miso",)
    assert ended is not None and ended.end_reason == "new"


async def test_an_extraction_cut_by_shutdown_runs_at_the_next_start(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(fake, tmp_path / "data")
    async with running_bot(config, shutdown_grace=0.2) as bot:
        fake.say("Hi Alice!")
        fake.say("Miso is a lovely name.")
        await bot.say("hi")
        await bot.say("my cat is called Miso")
        old = await bot.session()
        fake.fail_next(Fault.stall())  # the extraction's model call hangs past the grace
        await bot.say("/new")
        await wait_until(lambda: fake.stalled == 1)
    async with running_bot(config) as first_run_ended:
        pending = await first_run_ended.services.sessions.pending_extractions()
        assert [entry.session_id for entry in pending] == [old.id]  # left due, not lost
    fake.release()
    await wait_until(lambda: fake.stalled == 0)  # the held request is answered (no turn left)
    fake.call_tools(MISO)
    fake.say("Saved.")
    async with running_bot(config, sweep_seconds=0.05) as restarted:

        async def done() -> bool:
            return not await restarted.services.sessions.pending_extractions()

        await wait_for(done)
        entries = await restarted.user_entries()
    assert entries == ("Has a cat named Miso",)


async def test_progress_is_kept_per_chunk_and_a_failure_resumes_there(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    async with running_bot(bot_config(fake, tmp_path / "data")) as bot:
        session_id = await _long_session(bot, count=16)
        stored = await bot.transcript(session_id)
        fake.say("Nothing to save.")  # the first chunk
        fake.add_turn(Turn("Nothing to save.", fault=Fault.http(400)))  # the second: fails once
        await extract_session(bot.background.context, session_id, False)
        first_stop = await bot.services.sessions.extraction_progress(session_id)
        await extract_session(bot.background.context, session_id, False)
        second_stop = await bot.services.sessions.extraction_progress(session_id)
        again = len(fake.requests)
        await extract_session(bot.background.context, session_id, False)  # nothing left
    requests = extraction_requests(fake)
    assert 0 < first_stop < stored[-1].id  # type: ignore[operator]
    assert second_stop == stored[-1].id
    first_chunk, failed, resumed = (r["messages"][1]["content"] for r in requests)
    assert "msg-00 " in first_chunk and "msg-15 " not in first_chunk
    assert resumed == failed and "msg-00 " not in resumed and "msg-15 " in resumed
    assert len(fake.requests) == again  # a third run has nothing to extract


async def test_a_very_short_stretch_is_marked_without_a_model_call(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    async with running_bot(bot_config(fake, tmp_path / "data")) as bot:
        fake.say("Hello!")
        await bot.say("hi")
        session = await bot.session()
        before = len(fake.requests)
        await extract_session(bot.background.context, session.id, False)
        assert await extracted_to_end(bot, session.id)
    assert len(fake.requests) == before


async def test_forget_all_stops_an_extraction_of_that_person(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    async with running_bot(bot_config(fake, tmp_path / "data")) as bot:
        fake.say("Hi Alice!")
        fake.say("Miso is a lovely name.")
        await bot.say("hi")
        await bot.say("my cat is called Miso")
        fake.fail_next(Fault.stall())
        await bot.say("/new")
        await wait_until(lambda: fake.stalled == 1)
        await bot.conversations.sessions.drop_person(message("", "alice").user_key)
        jobs = [job.id for job in bot.background.jobs()]
        fake.release()
    assert not any(job.startswith("extract:") for job in jobs)
    assert await bot.user_entries() == ()


async def _long_session(bot: Bot, count: int) -> int:
    """A session of `count` messages of `MESSAGE_CHARS` characters, stored directly."""
    inbound = message("", "alice")
    origin = SessionOrigin(
        session_key=inbound.session_key(),
        source="telegram",
        user_key=inbound.user_key,
        chat_id="alice",
        chat_type="private",
    )
    now = time.time()
    messages = [
        NewMessage(
            role="user" if i % 2 == 0 else "assistant",
            content=f"msg-{i:02d} " + "x" * (MESSAGE_CHARS - 8),
            timestamp=now + i,
            key=f"long:{i}",
        )
        for i in range(count)
    ]
    result = await bot.services.sessions.append_messages(origin=origin, messages=messages)
    return result.session_id

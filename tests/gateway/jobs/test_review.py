"""The background review, end to end through Conversations against the fake model."""

from __future__ import annotations

from pathlib import Path

from gateway.jobs.review import REVIEW_PROMPT
from memory_core import recall_scope
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall
from tests.gateway.jobs.conftest import Bot, bot_config, running_bot, wait_for
from tests.gateway.serving import SKILLS

NURSE = ToolCall("memory", {"target": "user", "action": "add", "content": "Works as a nurse"})


def review_requests(fake: FakeOpenAI) -> list[dict[str, object]]:
    return [
        r.body
        for r in fake.requests
        if r.body and any(m.get("content") == REVIEW_PROMPT for m in r.body["messages"])
    ]


async def test_a_review_due_by_turns_saves_a_fact_and_tells_the_chat(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 2})
    fake.say("Hello!")
    fake.say("Long shifts are hard.")
    fake.call_tools(NURSE)  # the review
    fake.say("Saved.")
    async with running_bot(config) as bot:
        assert await bot.say("hi") == "Hello!"
        assert bot.notes == [] and review_requests(fake) == []  # one turn: not due yet
        assert await bot.say("I work as a nurse, nights this week") == "Long shifts are hard."
        await wait_until(lambda: bool(bot.notes))
        session = await bot.session()
        assert session is not None and session.ended_at is None
        transcript = await bot.transcript(session.id)
        counters = await bot.services.sessions.get_counters(session.id)
        record = await bot.services.sessions.get_session(session.id + 1)
        found = await bot.services.sessions.search(
            "nurse", recall_scope("telegram-alice", "alice", "private")
        )

    assert [text for _, text in bot.notes] == ["💾 Memory updated"]
    assert bot.notes[0][0].chat_id == "alice"
    assert await bot.user_entries() == ("Works as a nurse",)
    review = review_requests(fake)[0]
    turn = fake.requests[1].body
    assert review["messages"][0] == turn["messages"][0]  # the same system prompt bytes
    assert review["messages"][1:3] == turn["messages"][1:3]  # the conversation as sent
    assert {t["function"]["name"] for t in review["tools"]} == {
        "memory",
        "skills_list",
        "skill_view",
        "skill_manage",
    }
    assert len(transcript) == 4  # two turns; nothing of the review
    assert all(REVIEW_PROMPT not in m.content for m in transcript)
    assert counters is not None and counters.turns_since_memory == 0
    # the run is kept apart for an audit, ended, and recall never shows it
    assert record is not None and record.source == "review" and record.end_reason == "done"
    assert record.user_key == "telegram-alice"
    assert [hit.session_id for hit in found] == [session.id]


async def test_a_review_that_finds_nothing_sends_nothing(fake: FakeOpenAI, tmp_path: Path) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1})
    fake.say("Sure.")
    fake.say("Nothing to save.")
    async with running_bot(config) as bot:
        await bot.say("what's 2+2")
        session = await bot.session()

        await wait_for(lambda: counters_reset(bot, session.id))
    assert len(review_requests(fake)) == 1
    assert bot.notes == []
    assert await bot.user_entries() == ()


async def test_verbose_notifications_list_the_entries(fake: FakeOpenAI, tmp_path: Path) -> None:
    config = bot_config(
        fake, tmp_path / "data", memory={"nudge_interval": 1, "notifications": "verbose"}
    )
    fake.say("Noted.")
    fake.call_tools(NURSE)
    fake.say("Saved.")
    async with running_bot(config) as bot:
        await bot.say("I work as a nurse")
        await wait_until(lambda: bool(bot.notes))
    assert bot.notes[0][1] == "💾 Memory updated\n➕ Works as a nurse"


async def test_notifications_off_still_saves(fake: FakeOpenAI, tmp_path: Path) -> None:
    config = bot_config(
        fake, tmp_path / "data", memory={"nudge_interval": 1, "notifications": "off"}
    )
    fake.say("Noted.")
    fake.call_tools(NURSE)
    fake.say("Saved.")
    async with running_bot(config) as bot:
        await bot.say("I work as a nurse")
        await wait_for(lambda: _has_entry(bot))
    assert bot.notes == []


async def test_in_a_group_verbose_names_no_entries(fake: FakeOpenAI, tmp_path: Path) -> None:
    config = bot_config(
        fake, tmp_path / "data", memory={"nudge_interval": 1, "notifications": "verbose"}
    )
    fake.say("Noted.")
    fake.call_tools(NURSE)
    fake.say("Saved.")
    async with running_bot(config) as bot:
        await bot.say("I work as a nurse", group="-100")
        await wait_until(lambda: bool(bot.notes))
    assert [(to.chat_id, text) for to, text in bot.notes] == [("-100", "💾 Memory updated")]
    assert await bot.user_entries() == ("Works as a nurse",)


async def test_a_new_message_cancels_a_review_in_flight(fake: FakeOpenAI, tmp_path: Path) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1})
    fake.say("First reply.")
    async with running_bot(config) as bot:
        await bot.say("one")
        fake.fail_next(Fault.stall())  # the review's request hangs
        await wait_until(lambda: fake.stalled == 1)
        assert [job.running for job in bot.background.jobs() if job.id.startswith("review:")] == [
            True
        ]
        fake.say("Second reply.")  # the turn's
        fake.say("Nothing to save.")  # the review scheduled after the second reply
        assert await bot.say("two") == "Second reply."
        await wait_until(lambda: len(review_requests(fake)) == 2)
        session = await bot.session()

        await wait_for(lambda: counters_reset(bot, session.id))
        fake.release()
    assert bot.notes == []
    assert await bot.user_entries() == ()


async def test_a_failing_review_tells_the_chat_nothing(fake: FakeOpenAI, tmp_path: Path) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1})
    fake.say("Reply.")
    async with running_bot(config) as bot:
        await bot.say("one")
        fake.fail_next(Fault.http(400, message="bad request"))  # the review's call, not retried
        session = await bot.session()

        await wait_for(lambda: counters_reset(bot, session.id))
        fake.say("Next reply.")
        fake.say("Nothing to save.")
        assert await bot.say("two") == "Next reply."  # not held up by the failed review
        await wait_until(lambda: len(review_requests(fake)) == 2)  # and reviews go on
    assert bot.notes == []


async def test_malformed_tool_calls_change_nothing(fake: FakeOpenAI, tmp_path: Path) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1})
    fake.say("Reply.")
    fake.call_tools(ToolCall("memory", '{"target": "user", "action": "add", "content": '))
    fake.call_tools(ToolCall("no_such_tool", {}))
    fake.say("Done.")
    async with running_bot(config) as bot:
        await bot.say("one")
        await wait_until(lambda: len(review_requests(fake)) == 3)
        session = await bot.session()

        await wait_for(lambda: counters_reset(bot, session.id))
    assert bot.notes == []
    assert await bot.user_entries() == ()


async def test_a_review_cannot_change_an_operators_skill_or_shared_memory(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1})
    skill = SKILLS / "writing-memory-entries" / "SKILL.md"
    before = skill.read_bytes()
    fake.say("Reply.")
    fake.call_tools(ToolCall("skill_view", {"name": "writing-memory-entries"}))
    fake.call_tools(
        ToolCall(
            "skill_manage",
            {
                "action": "patch",
                "name": "writing-memory-entries",
                "old_string": "memory",
                "new_string": "HACKED",
            },
        ),
        ToolCall("memory", {"target": "memory", "action": "add", "content": "Shared: hacked"}),
    )
    fake.say("Done.")
    async with running_bot(config) as bot:
        await bot.say("one")
        await wait_until(lambda: len(review_requests(fake)) == 3)
        results = [m for m in review_requests(fake)[2]["messages"] if m["role"] == "tool"]
        shared = bot.services.memory.read("memory").entries
    assert skill.read_bytes() == before
    assert shared == ()
    assert [r["content"].count('"success": false') for r in results[-2:]] == [1, 1]
    assert bot.notes == []


async def _has_entry(bot: Bot) -> bool:
    return bool(await bot.user_entries())


async def test_tool_steps_without_a_skill_write_call_for_a_review(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(
        fake,
        tmp_path / "data",
        memory={"nudge_interval": 0},
        skills={"creation_nudge_interval": 2},
    )
    fake.call_tools(ToolCall("skills_list", {}))
    fake.say("One step.")
    async with running_bot(config) as bot:
        await bot.say("list your skills")  # one tool step: not due
        assert review_requests(fake) == []
        fake.call_tools(ToolCall("skills_list", {}))
        fake.say("Two steps.")
        fake.say("Nothing to save.")
        await bot.say("and again")
        await wait_until(lambda: len(review_requests(fake)) == 1)
        session = await bot.session()

        await wait_for(lambda: counters_reset(bot, session.id, steps=True))
    assert bot.notes == []


async def counters_reset(bot: Bot, session_id: int, steps: bool = False) -> bool:
    """Whether the session's review counter (turns, or tool steps) is back to 0."""
    counters = await bot.services.sessions.get_counters(session_id)
    if counters is None:
        return False
    return (counters.steps_since_skill if steps else counters.turns_since_memory) == 0

"""What a review may write, what it stages, and what the chat is told (items 3, 5, 8).

Through Conversations and the real background work against the fake model. The
judge's wiring is tested with the fake model answering its question; how well a
real model tells a fact from an instruction is not something a test can show.
"""

from __future__ import annotations

from pathlib import Path

from memory_core import PendingChanges
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall
from tests.gateway.jobs.conftest import bot_config, running_bot

NURSE = ToolCall("memory", {"target": "user", "action": "add", "content": "Works as a nurse"})
NIGHTS = "I work as a nurse, nights this week"
JUDGE_UNSURE = "the judge could not confirm it is a fact"


def judge_requests(fake: FakeOpenAI) -> list[str]:
    """The entries the judge was asked about, in order."""
    asked = []
    for request in fake.requests:
        messages = (request.body or {}).get("messages", [])
        if messages and "You check entries" in str(messages[0].get("content")):
            asked.append(str(messages[-1]["content"]))
    return asked


def judged_config(fake: FakeOpenAI, home: Path, **memory: object) -> object:
    return bot_config(
        fake,
        home,
        memory={"nudge_interval": 1, "judge": True, **memory},
        auxiliary={"model": "judge-model"},  # an auxiliary model of its own: the judge runs
    )


async def test_the_judge_answering_instruction_stages_the_entry(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    fake.say("Long shifts are hard.")
    fake.call_tools(NURSE)  # the review
    fake.say("instruction")  # the judge
    fake.say("Saved.")
    async with running_bot(judged_config(fake, tmp_path / "data")) as bot:  # type: ignore[arg-type]
        await bot.say(NIGHTS)
        pending = PendingChanges(bot.services.memory)
        await wait_until(lambda: bool(pending.list("telegram-alice")))
        staged = pending.list("telegram-alice")
        assert await bot.user_entries() == ()
    assert [(c.content, c.reason) for c in staged] == [("Works as a nurse", JUDGE_UNSURE)]
    assert ["Works as a nurse" in asked for asked in judge_requests(fake)] == [True]
    assert bot.notes == []  # nothing on disk, so no "Memory updated"


async def test_the_judge_answering_fact_lets_it_through(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.say("Long shifts are hard.")
    fake.call_tools(NURSE)
    fake.say("Fact.")
    fake.say("Saved.")
    async with running_bot(judged_config(fake, tmp_path / "data")) as bot:  # type: ignore[arg-type]
        await bot.say(NIGHTS)
        await wait_until(lambda: bool(bot.notes))
        assert await bot.user_entries() == ("Works as a nurse",)
        assert PendingChanges(bot.services.memory).list("telegram-alice") == ()


async def test_a_failing_judge_fails_closed(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.say("Long shifts are hard.")
    fake.call_tools(NURSE)
    fake.say("fact", fault=Fault.http(400, message="bad request"))  # the judge's call fails
    fake.say("Saved.")
    async with running_bot(judged_config(fake, tmp_path / "data")) as bot:  # type: ignore[arg-type]
        await bot.say(NIGHTS)
        pending = PendingChanges(bot.services.memory)
        await wait_until(lambda: bool(pending.list("telegram-alice")))
        assert [c.reason for c in pending.list("telegram-alice")] == [JUDGE_UNSURE]
        assert await bot.user_entries() == ()


async def test_without_an_auxiliary_model_the_judge_does_not_run(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1, "judge": True})
    fake.say("Long shifts are hard.")
    fake.call_tools(NURSE)
    fake.say("Saved.")
    async with running_bot(config) as bot:
        await bot.say(NIGHTS)
        await wait_until(lambda: bool(bot.notes))
        assert await bot.user_entries() == ("Works as a nurse",)
    assert judge_requests(fake) == []


async def test_a_review_may_stage_only_three_flagged_entries_a_day(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1})
    said = "my sites are a.example.com/x b.example.com/x c.example.com/x d.example.com/x"
    links = [
        ToolCall(
            "memory", {"target": "user", "action": "add", "content": f"Site {n}.example.com/x"}
        )
        for n in "abcd"
    ]
    fake.say("Nice sites.")
    for call in links:
        fake.call_tools(call)
    fake.say("Done.")
    async with running_bot(config) as bot:
        await bot.say(said)
        pending = PendingChanges(bot.services.memory)
        await wait_until(lambda: len(fake.requests) >= 6)
        await wait_until(lambda: len(pending.list("telegram-alice")) == 3)
        assert await bot.user_entries() == ()
    tool_results = [
        m["content"] for m in fake.requests[-1].body["messages"] if m.get("role") == "tool"
    ]
    assert "at most 3" in tool_results[-1]  # the fourth is refused, and nothing kept of it
    assert [c.content for c in pending.list("telegram-alice")] == [
        "Site a.example.com/x",
        "Site b.example.com/x",
        "Site c.example.com/x",
    ]


async def test_a_review_cancelled_after_writing_still_says_so(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1})
    fake.say("Long shifts are hard.")
    fake.call_tools(NURSE)  # the review writes...
    fake.say("Saved.", delay=20.0)  # ...then waits until the next message cancels it
    async with running_bot(config) as bot:
        await bot.say(NIGHTS)
        await wait_until(lambda: len(fake.requests) == 3)  # the review's second call
        assert await bot.user_entries() == ("Works as a nurse",)
        assert bot.notes == []
        fake.say("Take care.")
        assert await bot.say("thanks") == "Take care."
        await wait_until(lambda: bool(bot.notes))
    assert [text for _, text in bot.notes] == ["💾 Memory updated"]
    assert bot.notes[0][0].chat_id == "alice"


async def test_in_the_persons_own_turn_a_link_waits_and_the_model_is_told(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 0})
    blog = {"target": "user", "action": "add", "content": "Blog: https://alice.example"}
    fake.call_tools(ToolCall("memory", blog))
    fake.say("I'll remember it once you approve.")
    async with running_bot(config) as bot:
        await bot.say("remember my blog https://alice.example")
        staged = PendingChanges(bot.services.memory).list("telegram-alice")
        assert await bot.user_entries() == ()
    [change] = staged
    assert (change.origin.kind, change.reason) == ("person", "it contains a link")
    told = [m["content"] for m in fake.requests[-1].body["messages"] if m.get("role") == "tool"]
    assert "awaits their approval" in told[-1] and "never that it was saved" in told[-1]


async def test_write_approval_all_stages_a_plain_fact_of_the_persons_turn(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(
        fake, tmp_path / "data", memory={"nudge_interval": 0, "write_approval": "all"}
    )
    fake.call_tools(NURSE)
    fake.say("Noted, once you approve.")
    async with running_bot(config) as bot:
        await bot.say(NIGHTS)
        staged = PendingChanges(bot.services.memory).list("telegram-alice")
        assert await bot.user_entries() == ()
        reply = await bot.say("/memory approve all")
        assert "Saved: add “Works as a nurse”" in reply
        assert await bot.user_entries() == ("Works as a nurse",)
    assert [c.reason for c in staged] == ["every memory change waits for your approval"]

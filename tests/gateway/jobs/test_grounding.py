"""The memory tool held to the person's words (`gateway.jobs.grounding`).

What is not grounded never reaches the tool: refused with the reason (and counted),
or handed to the stager with its reason and closest message. What is grounded reaches
it with its evidence, which a real store keeps beside the entry; an add that states a
new value for one of the person's entries becomes a replace of it. Removals and calls
that are not about the person go through untouched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from gateway.agent.tools import Tool, in_thread
from gateway.jobs.approvals import stager
from gateway.jobs.grounding import (
    NOT_SAID_CODE,
    Grounding,
    Unsupported,
    fixed_words,
    grounded,
    unsupported,
)
from memory_core import (
    MEMORY_TOOL_SCHEMA,
    Approval,
    EntryOrigin,
    FileMemoryStore,
    GroundedArguments,
    MemoryTool,
    Origin,
    OwnWords,
    PendingChanges,
    Said,
)
from memory_core.file_memory import entry_handle


class Recorder:
    """The real tool's stand-in: records what reached it."""

    def __init__(self) -> None:
        self.calls: list[Mapping[str, Any]] = []

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        self.calls.append(arguments)
        return json.dumps({"success": True})


def held(
    *said: str,
    stage: Any = None,
    entries: Sequence[EntryOrigin] = (),
    refused: list[tuple[str, str]] | None = None,
) -> tuple[Tool, Recorder]:
    recorder = Recorder()

    async def current() -> Sequence[EntryOrigin]:
        return entries

    grounding = Grounding(
        fixed_words(OwnWords([Said(100 + i, s) for i, s in enumerate(said)])),
        "review",
        stage,
        entries=current,
        on_refused=None if refused is None else lambda job, v: refused.append((job, v)),
    )
    [tool] = grounded([Tool(MEMORY_TOOL_SCHEMA, recorder)], grounding)
    return tool, recorder


def add(content: str) -> dict[str, Any]:
    return {"target": "user", "action": "add", "content": content}


async def test_an_unsaid_entry_never_reaches_the_tool_is_counted_and_the_model_told_why() -> None:
    counted: list[tuple[str, str]] = []
    tool, recorder = held("I work as a nurse", refused=counted)
    answer = json.loads(await tool.handler(add("Allergic to peanuts")))
    assert recorder.calls == []
    assert answer["success"] is False and answer["code"] == NOT_SAID_CODE
    assert "'allergic'" in answer["error"] and "'peanuts'" in answer["error"]
    assert counted == [("review", "not_said")]

    assert json.loads(await tool.handler(add("Works as a nurse")))["success"] is True
    [call] = recorder.calls
    assert isinstance(call, GroundedArguments) and call == add("Works as a nurse")
    [evidence] = call.evidence["Works as a nurse"]
    assert evidence.message_id == 100 and "nurse" in evidence.span


@pytest.mark.parametrize(
    ("said", "entry", "verdict"),
    [
        ("guess which city I live in", "User lives in Zanzibar.", "not_said"),  # its guess
        ("do I live in Zanzibar?", "User lives in Zanzibar.", "asked"),
        ("I do not live in Zanzibar", "User lives in Zanzibar.", "opposite"),
        ("diabetes? no way", "User has diabetes.", "opposite"),
        ("my sister is allergic to nuts", "User is allergic to nuts.", "someone_else"),
    ],
)
async def test_a_question_a_denial_or_someone_elses_fact_is_refused_with_its_verdict(
    said: str, entry: str, verdict: str
) -> None:
    counted: list[tuple[str, str]] = []
    tool, recorder = held(said, refused=counted)
    answer = json.loads(await tool.handler(add(entry)))
    assert answer["code"] == NOT_SAID_CODE and recorder.calls == []
    assert counted == [("review", verdict)]


async def test_a_batch_with_one_unsaid_entry_is_refused_whole() -> None:
    tool, recorder = held("I work as a nurse")
    batch = {
        "target": "user",
        "operations": [
            {"action": "add", "content": "Works as a nurse"},
            {"action": "replace", "old_text": "nurse", "content": "Head of cardiology"},
        ],
    }
    answer = json.loads(await tool.handler(batch))
    assert answer["code"] == NOT_SAID_CODE and "Head of cardiology" in answer["error"]
    assert recorder.calls == []


@pytest.mark.parametrize(
    "arguments",
    [
        {"target": "user", "action": "remove", "old_text": "peanuts"},  # forgetting is fine
        {"target": "memory", "action": "add", "content": "Deploys on Fridays"},  # tool refuses
        {"target": "user", "action": "explode", "content": "peanuts"},  # tool explains
        {"target": "user", "operations": "not a list"},
    ],
)
async def test_what_is_not_a_new_entry_about_the_person_goes_to_the_tool(
    arguments: dict[str, Any],
) -> None:
    tool, recorder = held("hello")
    await tool.handler(arguments)
    assert recorder.calls == [arguments]


def test_a_malformed_call_has_nothing_to_check() -> None:
    said = OwnWords(["hi"])
    assert unsupported("{not json", said) == ()
    assert unsupported('["a list"]', said) == ()
    [refused] = unsupported('{"target": "user", "action": "add", "content": "Owns a boat"}', said)
    assert refused.content == "Owns a boat" and refused.reason == "not in your words"


async def test_with_a_stager_a_refused_call_is_staged_with_its_reason_and_closest_message() -> None:
    staged: list[tuple[GroundedArguments, tuple[Unsupported, ...]]] = []

    async def stage(arguments: GroundedArguments, why: tuple[Unsupported, ...]) -> str:
        staged.append((arguments, why))
        return json.dumps({"success": True, "staged": True})

    tool, recorder = held("hi there", "do I live in Zanzibar? I forget", stage=stage)
    call = add("User lives in Zanzibar.")
    assert json.loads(await tool.handler(call)) == {"success": True, "staged": True}
    assert recorder.calls == []
    [(arguments, why)] = staged
    assert arguments == call and [u.reason for u in why] == ["you asked, not said"]
    [closest] = arguments.evidence["User lives in Zanzibar."]
    assert closest.message_id == 101 and "Zanzibar" in closest.span


async def test_an_add_that_states_a_new_value_replaces_the_persons_old_entry() -> None:
    old = EntryOrigin("Lives in Lisbon", Origin("review", 1), 1.0)
    operator = EntryOrigin("Lives in Lisbon, per the operator", Origin("operator"), 1.0)
    tool, recorder = held("I moved to Porto last month", entries=[old])
    await tool.handler(add("Moved to Porto"))
    [call] = recorder.calls
    assert call["action"] == "replace" and call["old_text"] == entry_handle("Lives in Lisbon")

    tool, recorder = held("I moved to Porto last month", entries=[operator])
    await tool.handler(add("Moved to Porto"))  # not the person's entry: stays an add
    assert recorder.calls[0]["action"] == "add"


async def test_the_evidence_reaches_the_store_beside_the_entry(tmp_path: Path) -> None:
    store = FileMemoryStore(tmp_path)
    memory = MemoryTool(store, "telegram-1", is_admin=False, origin=Origin("review", 7))
    recorder_tool = Tool(MEMORY_TOOL_SCHEMA, in_thread(memory.handle))
    said = OwnWords([Said(41, "hello"), Said(42, "I play the cello in an orchestra")])
    [tool] = grounded([recorder_tool], Grounding(fixed_words(said), "review"))
    answer = json.loads(await tool.handler(add("Plays the cello in an orchestra")))
    assert answer["success"] is True
    [entry] = store.origins("user", "telegram-1")
    assert entry.text == "Plays the cello in an orchestra"
    assert [e.message_id for e in entry.evidence] == [42]
    assert "cello" in entry.evidence[0].span


async def test_a_call_half_grounded_stages_each_entry_with_its_own_reason(tmp_path: Path) -> None:
    store = FileMemoryStore(tmp_path)
    approval = Approval(PendingChanges(store), everything=True, batch="b")
    memory = MemoryTool(
        store, "telegram-1", is_admin=False, origin=Origin("review", 7), approval=approval
    )
    handler = in_thread(memory.handle)
    said = OwnWords([Said(41, "guess which city I live in"), Said(42, "I play the cello")])
    grounding = Grounding(fixed_words(said), "review", stager(handler, approval))
    [tool] = grounded([Tool(MEMORY_TOOL_SCHEMA, handler)], grounding)
    batch = {
        "target": "user",
        "operations": [
            {"action": "add", "content": "Plays the cello"},
            {"action": "add", "content": "Lives in Zanzibar"},
        ],
    }
    await tool.handler(batch)
    cello, zanzibar = PendingChanges(store).list("telegram-1")
    assert cello.grounded and [e.message_id for e in cello.evidence] == [42]
    assert "not in your words" not in cello.reason
    assert not zanzibar.grounded and zanzibar.reason == "not in your words"
    assert [e.message_id for e in zanzibar.evidence] == [41]  # the closest, shown
    assert store.read("user", "telegram-1").entries == ()

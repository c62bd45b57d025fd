"""How a finished turn moves the background review's counters."""

from __future__ import annotations

import json

from gateway.agent.review_counters import counter_update
from gateway.agent.turn import TurnMessage
from gateway.agent.wire import ToolCallRequest
from memory_core import CounterUpdate

OK = json.dumps({"success": True})
REFUSED = json.dumps({"success": False, "error": "no entry contains that text"})


def step(*names: str) -> TurnMessage:
    calls = tuple(ToolCallRequest(f"call_{n}", n, "{}") for n in names)
    return TurnMessage("assistant", None, tool_calls=calls)


def result(name: str, content: str = OK) -> TurnMessage:
    return TurnMessage("tool", content, tool_call_id=f"call_{name}", tool_name=name)


USER = TurnMessage("user", "hello")
REPLY = TurnMessage("assistant", "done")


def test_a_plain_turn_counts_one_turn_and_no_steps() -> None:
    assert counter_update([USER, REPLY]) == CounterUpdate(turns=1, steps=0)


def test_a_memory_write_resets_the_turns() -> None:
    update = counter_update([USER, step("memory"), result("memory"), REPLY])
    assert update == CounterUpdate(turns=0, steps=1, memory_written=True)


def test_a_refused_memory_call_is_no_write() -> None:
    update = counter_update([USER, step("memory"), result("memory", REFUSED), REPLY])
    assert update == CounterUpdate(turns=1, steps=1)


def test_only_steps_after_the_last_skill_write_count() -> None:
    messages = [
        USER,
        step("skills_list"),
        result("skills_list"),
        step("skill_manage"),
        result("skill_manage"),
        step("skill_view"),
        result("skill_view"),
        step("skills_list"),
        result("skills_list"),
        REPLY,
    ]
    assert counter_update(messages) == CounterUpdate(turns=1, steps=2, skill_written=True)


def test_a_result_that_is_not_json_is_no_write() -> None:
    update = counter_update([USER, step("skill_manage"), result("skill_manage", "oops"), REPLY])
    assert update == CounterUpdate(turns=1, steps=1)

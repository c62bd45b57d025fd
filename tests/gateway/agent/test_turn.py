"""`Agent.run_turn` against the fake model server: streaming, tools, a typed record."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from gateway.agent.model_client import ModelClient
from gateway.agent.tools import Tool
from gateway.agent.turn import (
    CUT_NOTE,
    EMPTY_NOTE,
    FILTERED_NOTE,
    STEP_LIMIT_NOTE,
    Agent,
    TurnMessage,
    fault_notice,
)
from gateway.errors import (
    ModelAuthError,
    ModelCutOffError,
    ModelError,
    ModelStalledError,
    RequestTooLargeError,
)
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall

ECHO_SCHEMA = {"type": "function", "function": {"name": "echo", "parameters": {}}}


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(chunk_size=3) as server:
        yield server


@pytest.fixture
async def model(fake: FakeOpenAI) -> AsyncIterator[ModelClient]:
    client = ModelClient(fake.url + "/v1", "sk-test", "m", 5.0, max_retries=0)
    yield client
    await client.close()


class Shown:
    def __init__(self) -> None:
        self.pieces: list[str] = []

    async def __call__(self, piece: str) -> None:
        self.pieces.append(piece)

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def echo_tool(seen: list[Mapping[str, Any]]) -> Tool:
    async def handler(arguments: Mapping[str, Any]) -> str:
        seen.append(arguments)
        return json.dumps({"success": True, "echo": arguments.get("say")})

    return Tool(ECHO_SCHEMA, handler)


async def test_plain_reply_is_streamed_and_recorded(fake: FakeOpenAI, model: ModelClient) -> None:
    fake.say("Hello there, friend.")
    shown = Shown()
    history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"}]
    result = await Agent(model, []).run_turn("SYSTEM", history, "hi", "", shown)
    assert shown.text == result.reply == "Hello there, friend."
    assert result.messages == (
        TurnMessage("user", "hi"),
        TurnMessage("assistant", "Hello there, friend."),
    )
    assert result.error is None and not result.truncated
    sent = fake.requests[0].body["messages"]
    assert sent == [
        {"role": "system", "content": "SYSTEM"},
        *history,
        {"role": "user", "content": "hi"},
    ]


async def test_recall_goes_to_the_request_only(fake: FakeOpenAI, model: ModelClient) -> None:
    fake.say("ok")
    result = await Agent(model, []).run_turn("S", [], "what did I say?", "you said tea", Shown())
    sent_user = fake.requests[0].body["messages"][-1]["content"]
    assert sent_user.startswith("what did I say?") and "<memory-context>" in sent_user
    assert "you said tea" in sent_user
    assert result.messages[0] == TurnMessage("user", "what did I say?")


async def test_tool_steps_are_run_and_recorded_in_order(
    fake: FakeOpenAI, model: ModelClient
) -> None:
    fake.call_tools(ToolCall("echo", {"say": "one"}, id="c1"))
    fake.say("Done.")
    seen: list[Mapping[str, Any]] = []
    result = await Agent(model, [echo_tool(seen)]).run_turn("S", [], "go", "", Shown())
    assert seen == [{"say": "one"}]
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    tool = result.messages[2]
    assert (tool.tool_call_id, tool.tool_name) == ("c1", "echo")
    assert json.loads(tool.content or "") == {"success": True, "echo": "one"}
    # The second request replays the assistant's call and the tool's result, paired.
    replay = fake.requests[1].body["messages"]
    assert replay[-2]["tool_calls"][0]["id"] == "c1"
    assert replay[-1]["tool_call_id"] == "c1" and replay[-1]["role"] == "tool"


async def test_bad_arguments_and_unknown_tools_are_tool_errors(
    fake: FakeOpenAI, model: ModelClient
) -> None:
    fake.call_tools(ToolCall("echo", '{"say": '), ToolCall("nope", {}))
    fake.say("Sorry.")
    seen: list[Mapping[str, Any]] = []
    result = await Agent(model, [echo_tool(seen)]).run_turn("S", [], "go", "", Shown())
    errors = [json.loads(m.content or "") for m in result.messages if m.role == "tool"]
    assert seen == []
    assert "not valid JSON" in errors[0]["error"] and "unknown tool" in errors[1]["error"]
    assert result.reply == "Sorry."


async def test_a_failure_after_a_tool_step_keeps_the_step(
    fake: FakeOpenAI, model: ModelClient
) -> None:
    fake.call_tools(ToolCall("echo", {"say": "x"}))
    fake.say("never", fault=Fault.http(500))
    result = await Agent(model, [echo_tool([])]).run_turn("S", [], "go", "", Shown())
    assert isinstance(result.error, ModelError)
    assert [m.role for m in result.messages] == ["user", "assistant", "tool"]


async def test_the_step_limit_ends_the_turn(fake: FakeOpenAI, model: ModelClient) -> None:
    for _ in range(2):
        fake.call_tools(ToolCall("echo", {"say": "again"}))
    shown = Shown()
    result = await Agent(model, [echo_tool([])], max_steps=2).run_turn("S", [], "go", "", shown)
    assert result.truncated and result.reply == STEP_LIMIT_NOTE
    assert shown.text.endswith(STEP_LIMIT_NOTE)
    assert result.messages[-1] == TurnMessage("assistant", STEP_LIMIT_NOTE)


async def test_text_shown_before_a_cut_is_kept_with_a_note(
    fake: FakeOpenAI, model: ModelClient
) -> None:
    fake.say("The answer is forty-two, because", fault=Fault.cut(after=4))
    shown = Shown()
    result = await Agent(model, []).run_turn("S", [], "why?", "", shown)
    assert isinstance(result.error, ModelCutOffError) and result.truncated
    assert shown.text == "The answe\n" + CUT_NOTE
    assert result.messages[-1] == TurnMessage("assistant", shown.text)


async def test_a_failure_before_any_text_shows_and_keeps_nothing(
    fake: FakeOpenAI, model: ModelClient
) -> None:
    fake.say("never", fault=Fault.http(503))
    shown = Shown()
    result = await Agent(model, []).run_turn("S", [], "hi", "", shown)
    assert isinstance(result.error, ModelError) and not result.truncated
    assert shown.text == "" and result.messages == (TurnMessage("user", "hi"),)


async def test_an_empty_reply_says_so(fake: FakeOpenAI, model: ModelClient) -> None:
    fake.say("")
    shown = Shown()
    result = await Agent(model, []).run_turn("S", [], "hi", "", shown)
    assert shown.text == result.reply == EMPTY_NOTE
    assert result.messages[-1] == TurnMessage("assistant", EMPTY_NOTE)
    assert result.error is None


async def test_a_filtered_reply_says_so_after_what_was_shown(
    fake: FakeOpenAI, model: ModelClient
) -> None:
    fake.say("Well, I", finish_reason="content_filter")
    shown = Shown()
    result = await Agent(model, []).run_turn("S", [], "hi", "", shown)
    assert shown.text == result.reply == "Well, I\n" + FILTERED_NOTE
    assert result.messages[-1] == TurnMessage("assistant", shown.text)


def test_fault_notices_are_short_and_never_carry_upstream_text() -> None:
    upstream = "model API error: HTTP 401: Incorrect API key provided: sk-wrong"
    faults = [
        ModelAuthError(upstream, status=401),
        ModelError("model API error: HTTP 500: upstream exploded", status=500),
        ModelError("model API error: HTTP 429: quota exceeded", status=429),
        ModelStalledError("no answer from the model for 30 s"),
        RequestTooLargeError("model API error: HTTP 400: maximum context length", status=400),
    ]
    notices = [fault_notice(fault) for fault in faults]
    assert all(n.startswith("(") and n.endswith(")") and len(n) <= 130 for n in notices)
    assert not any("HTTP" in n or "Incorrect" in n or "exploded" in n for n in notices)
    assert "credentials" in notices[0] and "fresh one" in notices[4]

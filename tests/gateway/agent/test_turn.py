"""`Agent.run_turn` against the fake model server: streaming, tools, a typed record."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gateway.agent.model_client import ModelClient
from gateway.agent.tools import Tool, provider_tools
from gateway.agent.turn import (
    CUT_NOTE,
    EMPTY_NOTE,
    FILTERED_NOTE,
    STEP_LIMIT_NOTE,
    Agent,
    TurnMessage,
    fault_notice,
)
from gateway.app import open_services
from gateway.config import Config, load_config
from gateway.errors import (
    ModelAuthError,
    ModelCutOffError,
    ModelError,
    ModelStalledError,
    RequestTooLargeError,
)
from gateway.messages import InboundMessage
from memory_core import (
    MemoryManager,
    MemoryProvider,
    ProviderRegistry,
    ProviderResources,
    SessionContext,
)
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink
from tests.timing import scaled

SKILLS = Path(__file__).resolve().parents[3] / "skills"
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


# -- the tool loop: parallel reads, ordered writes, the step cap, provider tools ------------


def logged_tool(
    name: str, log: list[str], body: Callable[[], Awaitable[None]], writes: bool
) -> Tool:
    schema = {"type": "function", "function": {"name": name, "parameters": {}}}

    async def handler(arguments: Mapping[str, Any]) -> str:
        log.append(f"{name} start")
        await body()
        log.append(f"{name} end")
        return json.dumps({"tool": name})

    return Tool(schema, handler, writes=writes)


async def test_reads_run_together_writes_in_order_and_results_keep_the_call_order(
    fake: FakeOpenAI, model: ModelClient
) -> None:
    log: list[str] = []
    a_started, b_done = asyncio.Event(), asyncio.Event()

    async def read_a() -> None:  # finishes only once b has: the two must overlap
        a_started.set()
        await asyncio.wait_for(b_done.wait(), scaled(5))

    async def read_b() -> None:
        await asyncio.wait_for(a_started.wait(), scaled(5))
        b_done.set()

    async def write() -> None:
        for _ in range(5):  # give a concurrent neighbour every chance to start
            await asyncio.sleep(0)

    tools = [
        logged_tool("read_a", log, read_a, writes=False),
        logged_tool("read_b", log, read_b, writes=False),
        logged_tool("write_1", log, write, writes=True),
        logged_tool("write_2", log, write, writes=True),
        logged_tool("read_c", log, write, writes=False),
    ]
    calls = ("read_a", "read_b", "write_1", "write_2", "read_c")
    fake.call_tools(*(ToolCall(name, {}, id=f"id_{name}") for name in calls))
    fake.say("Done.")
    result = await Agent(model, tools).run_turn("S", [], "go", "", Shown())
    assert log == [
        "read_a start",
        "read_b start",
        "read_b end",
        "read_a end",  # b finished first, yet a's result comes first below
        "write_1 start",
        "write_1 end",
        "write_2 start",
        "write_2 end",
        "read_c start",
        "read_c end",
    ]
    results = [m for m in result.messages if m.role == "tool"]
    assert [m.tool_call_id for m in results] == [f"id_{name}" for name in calls]
    assert [json.loads(m.content or "")["tool"] for m in results] == list(calls)
    replay = fake.requests[1].body["messages"]
    assert [m["tool_call_id"] for m in replay[-5:]] == [f"id_{name}" for name in calls]


@pytest.fixture
async def open_with(fake: FakeOpenAI, tmp_path: Path) -> Callable[[str], Any]:
    def opened(yaml: str) -> Any:
        config_file = tmp_path / "mnemo.yaml"
        config_file.write_text(yaml, encoding="utf-8")
        env = {
            "OPENAI_BASE_URL": fake.url + "/v1",
            "MNEMO_HOME": str(tmp_path / "data"),
            "MNEMO_SKILLS_DIR": str(SKILLS),
        }
        return open_services(load_config(config_file, environ=env))

    return opened


def inbound(text: str) -> InboundMessage:
    return InboundMessage(
        platform="telegram", chat_id="7", chat_type="private", user_id="7", text=text
    )


async def test_the_tool_step_cap_comes_from_config(
    fake: FakeOpenAI, open_with: Callable[[str], Any]
) -> None:
    for _ in range(3):
        fake.call_tools(ToolCall("skills_list", {}))
    fake.say("never reached")
    sink = ListSink()
    async with open_with("llm:\n  max_tool_steps: 2\n") as services:
        await serving(services).handle(inbound("loop"), sink)
    assert len(fake.requests) == 2
    assert sink.replies == [STEP_LIMIT_NOTE]
    assert Config().llm.max_tool_steps == 20


class Notes(MemoryProvider):
    """An external provider with two tools: a read-only lookup and a save that breaks."""

    name = "notes"

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def tool_schemas(self) -> list[dict[str, Any]]:
        lookup = {
            "name": "notes_lookup",
            "description": "Look up a note.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            "annotations": {"readOnlyHint": True},
        }
        save = {"type": "function", "function": {"name": "notes_save", "parameters": {}}}
        return [lookup, save]

    async def handle_tool_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        self.calls.append((name, dict(arguments)))
        if name == "notes_save":
            raise RuntimeError("disk full")
        return json.dumps({"note": "tea, no sugar"})


async def test_provider_tools_are_offered_and_their_calls_routed_to_the_provider(
    fake: FakeOpenAI, open_with: Callable[[str], Any], tmp_path: Path
) -> None:
    made: list[Notes] = []

    def notes_factory(resources: ProviderResources) -> MemoryProvider:
        made.append(Notes())
        return made[-1]

    registry = ProviderRegistry()
    registry.register("notes", notes_factory)

    def new_manager() -> MemoryManager:
        builtins, external = registry.create_selected(
            ProviderResources(home=tmp_path), builtins=[], external="notes"
        )
        return MemoryManager(builtins, external=external)

    fake.call_tools(
        ToolCall("notes_lookup", {"q": "drink"}, id="n1"), ToolCall("notes_save", {}, id="n2")
    )
    fake.say("You like tea.")
    sink = ListSink()
    async with open_with("") as opened:
        services = replace(opened, new_manager=new_manager)
        await serving(services).handle(inbound("what do I drink?"), sink)
    assert sink.replies == ["You like tea."]
    offered = {t["function"]["name"]: t for t in fake.requests[0].body["tools"]}
    assert {"memory", "skills_list", "notes_lookup", "notes_save"} <= set(offered)
    assert offered["notes_lookup"] == {  # the bare shape made whole, the hint not sent
        "type": "function",
        "function": {
            "name": "notes_lookup",
            "description": "Look up a note.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
    assert made[0].calls == [("notes_lookup", {"q": "drink"}), ("notes_save", {})]
    results = {
        m["tool_call_id"]: m for m in fake.requests[1].body["messages"] if m["role"] == "tool"
    }
    assert json.loads(results["n1"]["content"]) == {"note": "tea, no sugar"}
    error = json.loads(results["n2"]["content"])
    assert error["success"] is False and "disk full" in error["error"]


async def test_provider_tools_write_unless_marked_read_only(tmp_path: Path) -> None:
    manager = MemoryManager(external=Notes())
    await manager.initialize(
        SessionContext(
            session_id=1,
            user_key="telegram-7",
            platform="telegram",
            chat_id="7",
            chat_type="private",
        )
    )
    tools = provider_tools(manager)
    assert [(t.name, t.writes) for t in tools] == [("notes_lookup", False), ("notes_save", True)]
    await manager.shutdown()

"""ModelClient against the fake OpenAI server: streaming, tool calls, faults."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.agent.model_client import ModelClient
from gateway.errors import ModelError
from memory_core import decode_arguments
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(chunk_size=2) as server:
        yield server


def client(fake: FakeOpenAI, timeout: float = 5.0) -> ModelClient:
    return ModelClient(fake.url + "/v1", "sk-test", "gpt-4o-mini", timeout, max_retries=0)


async def test_stream_passes_deltas_and_returns_whole_text(fake: FakeOpenAI) -> None:
    fake.say("服务器重启之后 all good", usage=(10, 4))
    pieces: list[str] = []

    async def sink(piece: str) -> None:
        pieces.append(piece)

    model = client(fake)
    result = await model.stream_chat(MESSAGES, on_text=sink)
    await model.close()
    assert len(pieces) > 3
    assert "".join(pieces) == result.text == "服务器重启之后 all good"
    assert result.finish_reason == "stop" and result.tool_calls == ()
    assert (result.prompt_tokens, result.completion_tokens) == (10, 4)
    body = fake.requests[0].body
    assert body["stream"] is True and body["messages"] == MESSAGES and "tools" not in body


async def test_stream_accumulates_parallel_tool_calls(fake: FakeOpenAI) -> None:
    fake.call_tools(
        ToolCall("memory", {"action": "add", "content": "用户喜欢简短的回答"}, id="c1"),
        ToolCall("skill_view", {"name": "deploy"}, id="c2"),
    )
    model = client(fake)
    tools = [{"type": "function", "function": {"name": "memory", "parameters": {}}}]
    result = await model.stream_chat(MESSAGES, tools=tools)
    await model.close()
    assert result.finish_reason == "tool_calls"
    assert [c.id for c in result.tool_calls] == ["c1", "c2"]
    assert decode_arguments(result.tool_calls[0].arguments, ValueError) == {
        "action": "add",
        "content": "用户喜欢简短的回答",
    }
    assert result.tool_calls[1].as_message()["function"]["name"] == "skill_view"
    assert fake.requests[0].body["tools"] == tools


async def test_malformed_tool_arguments_are_kept_raw(fake: FakeOpenAI) -> None:
    fake.call_tools(ToolCall("memory", '{"action": "add", "content": '))
    model = client(fake)
    result = await model.stream_chat(MESSAGES)
    await model.close()
    assert result.tool_calls[0].arguments == '{"action": "add", "content": '
    with pytest.raises(ValueError, match="not valid JSON"):
        decode_arguments(result.tool_calls[0].arguments, ValueError)


async def test_cut_stream_is_a_truncation_error(fake: FakeOpenAI) -> None:
    fake.say("this reply never finishes", fault=Fault.cut(after=3))
    model = client(fake)
    with pytest.raises(ModelError, match="without a finish_reason"):
        await model.stream_chat(MESSAGES)
    await model.close()


async def test_rate_limit_carries_retry_after(fake: FakeOpenAI) -> None:
    fake.fail_next(Fault.http(429, retry_after=7))
    model = client(fake)
    with pytest.raises(ModelError) as info:
        await model.stream_chat(MESSAGES)
    await model.close()
    assert info.value.status == 429 and info.value.retry_after == 7.0


async def test_stalled_endpoint_times_out(fake: FakeOpenAI) -> None:
    fake.say("late", fault=Fault.stall())
    model = client(fake, timeout=0.3)
    with pytest.raises(ModelError, match="timed out"):
        await model.stream_chat(MESSAGES)
    await model.close()

"""ModelClient against the fake OpenAI server: streaming, tool calls, faults."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from gateway.agent.model_client import ModelClient
from gateway.agent.wire import EncodedMessage
from gateway.errors import (
    ModelAuthError,
    ModelCutOffError,
    ModelError,
    ModelStalledError,
    RequestTooLargeError,
)
from memory_core import decode_arguments
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall
from tests.timing import scaled

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
    with pytest.raises(ModelCutOffError, match="without a finish_reason"):
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
    with pytest.raises(ModelStalledError, match="no answer"):
        await model.stream_chat(MESSAGES)
    await model.close()


def resilient(
    fake: FakeOpenAI, stall: float = 0.3, timeout: float = 5.0, retries: int = 2
) -> ModelClient:
    return ModelClient(
        fake.url + "/v1",
        "sk-test",
        "gpt-4o-mini",
        timeout,
        max_retries=retries,
        stall_timeout=stall,
    )


class Shown:
    def __init__(self) -> None:
        self.pieces: list[str] = []

    async def __call__(self, piece: str) -> None:
        self.pieces.append(piece)


async def test_a_stall_mid_stream_fails_within_the_stall_timeout_without_a_retry(
    fake: FakeOpenAI,
) -> None:
    fake.say("abcdefghij", fault=Fault.stall(after=3))
    model = resilient(fake, stall=0.3, timeout=scaled(5.0))
    shown = Shown()
    started = time.monotonic()
    with pytest.raises(ModelStalledError):
        await model.stream_chat(MESSAGES, on_text=shown)
    elapsed = time.monotonic() - started
    await model.close()
    assert "".join(shown.pieces) == "abcd"
    assert len(fake.requests) == 1  # text was shown: a retry would show it twice
    assert elapsed < scaled(2.5)  # the per-read timeout (twice that) never comes into it


async def test_a_stall_before_headers_is_retried_and_then_answers(fake: FakeOpenAI) -> None:
    fake.fail_next(Fault.stall())
    fake.say("hello")
    model = resilient(fake, stall=0.3, timeout=5.0)
    result = await model.stream_chat(MESSAGES)
    await model.close()
    assert result.text == "hello" and len(fake.requests) == 2


async def test_retries_are_bounded_in_count(fake: FakeOpenAI) -> None:
    for _ in range(4):
        fake.fail_next(Fault.stall())
    model = resilient(fake, stall=0.2, timeout=5.0, retries=1)
    with pytest.raises(ModelStalledError):
        await model.stream_chat(MESSAGES)
    await model.close()
    assert len(fake.requests) == 2


async def test_retries_are_bounded_in_total_time(fake: FakeOpenAI) -> None:
    for _ in range(4):
        fake.fail_next(Fault.stall())
    # After 0.4 s, a retry could not run its whole stall window inside 1 s.
    model = resilient(fake, stall=0.4, timeout=1.0, retries=5)
    started = time.monotonic()
    with pytest.raises(ModelStalledError):
        await model.stream_chat(MESSAGES)
    elapsed = time.monotonic() - started
    await model.close()
    assert len(fake.requests) == 1 and elapsed < 1.0  # the client's own budget, not scaled


async def test_a_429_waits_its_retry_after_and_the_reply_is_shown_once(fake: FakeOpenAI) -> None:
    fake.fail_next(Fault.http(429, retry_after=0.3))
    fake.say("Hello there")
    model = resilient(fake)
    shown = Shown()
    started = time.monotonic()
    result = await model.stream_chat(MESSAGES, on_text=shown)
    elapsed = time.monotonic() - started
    await model.close()
    assert "".join(shown.pieces) == result.text == "Hello there"
    assert len(fake.requests) == 2 and elapsed >= 0.3


async def test_a_retry_after_beyond_the_budget_is_not_waited_for(fake: FakeOpenAI) -> None:
    fake.fail_next(Fault.http(429, retry_after=30))
    model = resilient(fake, timeout=2.0)
    with pytest.raises(ModelError) as info:
        await model.stream_chat(MESSAGES)
    await model.close()
    assert info.value.status == 429 and len(fake.requests) == 1


async def test_the_openai_clients_own_retries_are_off(fake: FakeOpenAI) -> None:
    fake.fail_next(Fault.http(500))
    fake.fail_next(Fault.http(500))
    model = resilient(fake, retries=0)
    with pytest.raises(ModelError) as info:
        await model.stream_chat(MESSAGES)
    await model.close()
    assert info.value.status == 500 and len(fake.requests) == 1


async def test_a_cut_before_any_text_is_retried(fake: FakeOpenAI) -> None:
    fake.say("first try", fault=Fault.cut(after=1))  # only the role delta arrives
    fake.say("second try")
    model = resilient(fake)
    result = await model.stream_chat(MESSAGES)
    await model.close()
    assert result.text == "second try" and len(fake.requests) == 2


@pytest.mark.parametrize("hard", [False, True])
async def test_a_cut_after_text_is_not_retried(fake: FakeOpenAI, hard: bool) -> None:
    fake.say("this reply never finishes", fault=Fault.cut(after=3, hard=hard))
    fake.say("a second reply would duplicate the first")
    model = resilient(fake)
    with pytest.raises(ModelCutOffError):
        await model.stream_chat(MESSAGES, on_text=Shown())
    await model.close()
    assert len(fake.requests) == 1


async def test_rejected_credentials_are_not_retried(fake: FakeOpenAI) -> None:
    fake.api_key = "sk-right"
    model = resilient(fake)
    with pytest.raises(ModelAuthError) as info:
        await model.stream_chat(MESSAGES)
    await model.close()
    assert info.value.status == 401 and "Incorrect API key provided" in str(info.value)
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "fault",
    [
        Fault.http(
            400,
            message="This model's maximum context length is 128000 tokens.",
            code="context_length_exceeded",
        ),
        Fault.http(400, message="Please reduce the length: maximum context length exceeded"),
        Fault.http(413, message="Request Entity Too Large"),
    ],
)
async def test_a_request_refused_as_too_large_is_its_own_error(
    fake: FakeOpenAI, fault: Fault
) -> None:
    fake.fail_next(fault)
    model = resilient(fake)
    with pytest.raises(RequestTooLargeError):
        await model.stream_chat(MESSAGES)
    await model.close()
    assert len(fake.requests) == 1


async def test_other_bad_requests_are_plain_model_errors(fake: FakeOpenAI) -> None:
    fake.fail_next(Fault.http(400, message="Invalid schema for function 'memory'"))
    model = resilient(fake)
    with pytest.raises(ModelError) as info:
        await model.stream_chat(MESSAGES)
    await model.close()
    assert type(info.value) is ModelError and len(fake.requests) == 1


async def test_complete_returns_a_non_streamed_reply(fake: FakeOpenAI) -> None:
    fake.say("A short recap: the deploy failed on the migration.")
    model = client(fake)
    text = await model.complete(MESSAGES, max_tokens=200)
    await model.close()
    assert text == "A short recap: the deploy failed on the migration."
    body = fake.requests[0].body
    assert not body.get("stream") and body["max_tokens"] == 200


async def test_complete_retries_a_5xx_then_raises_a_model_error(fake: FakeOpenAI) -> None:
    fake.fail_next(Fault.http(503))
    fake.say("second time lucky")
    model = ModelClient(fake.url + "/v1", "sk-test", "m", 30.0, max_retries=1, stall_timeout=1.0)
    assert await model.complete(MESSAGES) == "second time lucky"
    fake.fail_next(Fault.http(401))
    with pytest.raises(ModelError):
        await model.complete(MESSAGES)
    await model.close()


async def test_complete_waits_a_429s_retry_after_and_logs_the_retry(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake.fail_next(Fault.http(429, retry_after=0.3))
    fake.say("after the wait")
    model = resilient(fake)
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="gateway.agent.model_client"):
        text = await model.complete(MESSAGES)
    elapsed = time.monotonic() - started
    await model.close()
    assert text == "after the wait" and len(fake.requests) == 2 and elapsed >= 0.3
    assert [r.getMessage() for r in caplog.records] == [
        "model call failed (model API error: HTTP 429: Error code: 429 - fake fault 429);"
        " retry 1 in 0.3 s"
    ]


async def test_complete_does_not_wait_a_retry_after_beyond_the_budget(fake: FakeOpenAI) -> None:
    fake.fail_next(Fault.http(429, retry_after=30))
    model = resilient(fake, timeout=scaled(2.0))
    started = time.monotonic()
    with pytest.raises(ModelError) as info:
        await model.complete(MESSAGES)
    elapsed = time.monotonic() - started
    await model.close()
    assert info.value.status == 429 and len(fake.requests) == 1 and elapsed < scaled(2.0)


async def test_a_stream_logs_each_retry_it_makes(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake.fail_next(Fault.http(503))
    fake.fail_next(Fault.http(503))
    fake.say("third time")
    model = resilient(fake)
    with caplog.at_level(logging.INFO, logger="gateway.agent.model_client"):
        result = await model.stream_chat(MESSAGES)
    await model.close()
    assert result.text == "third time" and len(fake.requests) == 3
    assert [r.getMessage().rsplit("retry", 1)[1] for r in caplog.records] == [
        " 1 in 0.5 s",
        " 2 in 1.0 s",
    ]


# A request and the exact bytes `chat.completions.create` of the `openai` client sent for
# it, captured before ModelClient encoded the body itself: a provider's prompt cache
# depends on these bytes, so they must not move (keys, their order, the encoding).
GOLDEN_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": 'Be brief ✓ "quoted"'},
    {"role": "user", "content": "日本語 and \u2028 line"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "memory", "arguments": '{"a": 1}'},
            }
        ],
    },
    {"role": "tool", "content": "{}", "tool_call_id": "c1", "name": "memory"},
]
GOLDEN_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "memory",
            "description": "d",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    }
]
GOLDEN_BODY = (
    b'{"model":"gpt-x","stream":true,"messages":[{"role":"system","content":"Be brief '
    b'\xe2\x9c\x93 \\"quoted\\""},{"role":"user","content":"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e'
    b' and \xe2\x80\xa8 line"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1",'
    b'"type":"function","function":{"name":"memory","arguments":"{\\"a\\": 1}"}}]},{"role":'
    b'"tool","content":"{}","tool_call_id":"c1","name":"memory"}],"stream_options":'
    b'{"include_usage":true},"tools":[{"type":"function","function":{"name":"memory",'
    b'"description":"d","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}]}'
)
GOLDEN_BODY_NO_TOOLS = (
    b'{"model":"gpt-x","stream":true,"messages":[{"role":"system","content":"Be brief '
    b'\xe2\x9c\x93 \\"quoted\\""},{"role":"user","content":"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e'
    b' and \xe2\x80\xa8 line"}],"stream_options":{"include_usage":true}}'
)
REPLY = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":'
    b'[{"index":0,"delta":{"role":"assistant","content":"hi"}}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":'
    b'[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":7,"completion_tokens":1}}\n\n'
    b"data: [DONE]\n\n"
)


async def test_a_streamed_request_is_byte_for_byte_what_the_openai_client_sent() -> None:
    seen: list[httpx2.Request] = []

    async def endpoint(request: httpx2.Request) -> httpx2.Response:
        await request.aread()
        seen.append(request)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=REPLY)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint))
    model = ModelClient("http://model.invalid/v1", "sk-test", "gpt-x", 5.0, http_client=http)
    result = await model.stream_chat(GOLDEN_MESSAGES, GOLDEN_TOOLS)
    await model.stream_chat(GOLDEN_MESSAGES[:2])
    encoded = [EncodedMessage(m) for m in GOLDEN_MESSAGES[1:]]  # a kept history's messages
    await model.stream_chat([GOLDEN_MESSAGES[0], *encoded], GOLDEN_TOOLS)
    await model.close()
    assert [r.content for r in seen] == [GOLDEN_BODY, GOLDEN_BODY_NO_TOOLS, GOLDEN_BODY]
    for request in seen:
        assert request.method == "POST" and request.url.path == "/v1/chat/completions"
        assert request.headers["content-type"] == "application/json"
        assert request.headers["authorization"] == "Bearer sk-test"
    assert (result.text, result.finish_reason) == ("hi", "stop")
    assert (result.prompt_tokens, result.completion_tokens) == (7, 1)


def test_an_encoded_message_refuses_changes() -> None:
    message = EncodedMessage({"role": "user", "content": "hi"})
    with pytest.raises(TypeError):
        message["content"] = "changed"
    with pytest.raises(TypeError):
        message.update(content="changed")
    assert message == {"role": "user", "content": "hi"} and dict(message) == message


def test_malformed_stream_chunks_are_skipped_not_a_crash() -> None:
    """Chunks are read as plain JSON now: a field of the wrong type counts as nothing."""
    from gateway.agent.wire import StreamAccumulator

    acc = StreamAccumulator()
    for chunk in (
        "not an object",
        {"choices": "nope"},
        {"choices": [{"delta": "text"}]},
        {"choices": [{"delta": {"content": 5, "tool_calls": 7}}]},
        {"choices": [{"delta": {"tool_calls": ["x", {"index": 0, "function": "f"}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": 3, "function": {"name": 1}}]}}]},
        {"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]},
    ):
        acc.add(chunk)
    result = acc.result()
    assert result.text == "hi"
    assert result.finish_reason == "stop"
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("", "")]

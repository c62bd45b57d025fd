"""The fake OpenAI server, proven with the real `openai` client (httpx2 over loopback)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from subprocess import PIPE
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall, Turn, image_parts, load_script
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
USER = [{"role": "user", "content": "你好"}]


def client(fake: FakeOpenAI, max_retries: int = 0, timeout: float = 5.0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=fake.url + "/v1", api_key="sk-test", max_retries=max_retries, timeout=timeout
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(chunk_size=3) as server:
        yield server


async def stream_chunks(fake: FakeOpenAI, **kwargs: Any) -> list[Any]:
    async with client(fake) as c:
        stream = await c.chat.completions.create(
            model="gpt-4o-mini", messages=USER, stream=True, **kwargs
        )
        return [chunk async for chunk in stream]


def content_of(chunks: list[Any]) -> list[str]:
    return [
        ch.choices[0].delta.content for ch in chunks if ch.choices and ch.choices[0].delta.content
    ]


async def test_non_streaming_text_with_usage(fake: FakeOpenAI) -> None:
    fake.say("Hello there", usage=(12, 3))
    async with client(fake) as c:
        reply = await c.chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert reply.object == "chat.completion"
    assert reply.choices[0].message.content == "Hello there"
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].finish_reason == "stop"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (12, 3)
    assert reply.usage.total_tokens == 15


async def test_non_streaming_tool_calls(fake: FakeOpenAI) -> None:
    fake.call_tools(ToolCall("memory", {"action": "add", "content": "喜欢茶"}, id="call_x"))
    async with client(fake) as c:
        reply = await c.chat.completions.create(model="gpt-4o-mini", messages=USER)
    message = reply.choices[0].message
    assert reply.choices[0].finish_reason == "tool_calls"
    assert message.content is None
    assert message.tool_calls[0].id == "call_x"
    assert message.tool_calls[0].function.name == "memory"
    assert json.loads(message.tool_calls[0].function.arguments)["content"] == "喜欢茶"


async def test_streamed_cjk_text_is_split_mid_string_and_reassembled(fake: FakeOpenAI) -> None:
    text = "服务器重启之后，记忆还在吗？Yes 🙂 ok"
    fake.say(text)
    chunks = await stream_chunks(fake)
    pieces = content_of(chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len(pieces) == -(-len(text) // 3)  # ceil: three characters a delta
    assert pieces[0] == "服务器" and pieces[1] == "重启之"  # split inside a CJK run
    assert "".join(pieces) == text
    assert [ch.choices[0].finish_reason for ch in chunks][-1] == "stop"
    assert all(ch.choices[0].finish_reason is None for ch in chunks[:-1])


async def test_two_parallel_tool_calls_accumulate_by_index(fake: FakeOpenAI) -> None:
    first = {"query": "上周的部署问题", "limit": 3}
    second = {"action": "add", "content": "用户喜欢简短的回答"}
    fake.call_tools(ToolCall("session_search", first), ToolCall("memory", second))
    chunks = await stream_chunks(fake)
    calls: dict[int, dict[str, str]] = {}
    headers = 0
    for chunk in chunks:
        for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            if tc.id:
                headers += 1
                assert tc.function.arguments == ""  # the header carries no arguments
                slot["id"], slot["name"] = tc.id, tc.function.name
            slot["arguments"] += tc.function.arguments or ""
    assert headers == 2
    assert [calls[i]["name"] for i in (0, 1)] == ["session_search", "memory"]
    assert calls[0]["id"] != calls[1]["id"]
    assert json.loads(calls[0]["arguments"]) == first
    assert json.loads(calls[1]["arguments"]) == second
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_usage_chunk_when_requested(fake: FakeOpenAI) -> None:
    fake.say("short", usage=(40, 2))
    chunks = await stream_chunks(fake, stream_options={"include_usage": True})
    assert chunks[-1].choices == []
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.total_tokens) == (40, 42)
    assert chunks[-2].choices[0].finish_reason == "stop"
    fake.say("short")
    assert all(ch.usage is None for ch in await stream_chunks(fake))


@pytest.mark.parametrize("attached", [False, True], ids=["queued", "attached"])
async def test_429_is_retried_after_retry_after_ms(fake: FakeOpenAI, attached: bool) -> None:
    fault = Fault.http(429, retry_after=0, retry_after_ms=10)
    if attached:
        fake.say("after the wait", fault=fault)
    else:
        fake.fail_next(fault)
        fake.say("after the wait")
    async with client(fake, max_retries=1) as c:
        reply = await c.chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert reply.choices[0].message.content == "after the wait"
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
    ],
)
async def test_http_faults_raise_the_matching_error(
    fake: FakeOpenAI, status: int, error: type[openai.APIStatusError]
) -> None:
    fake.fail_next(Fault.http(status))
    async with client(fake) as c:
        with pytest.raises(error) as caught:
            await c.chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert caught.value.status_code == status
    assert caught.value.body["message"] == f"fake fault {status}"  # OpenAI-shaped body
    assert len(fake.requests) == 1


async def test_wrong_api_key_is_rejected() -> None:
    async with FakeOpenAI(api_key="sk-right") as fake:
        fake.say("never sent")
        async with client(fake) as c:
            with pytest.raises(openai.AuthenticationError):
                await c.chat.completions.create(model="gpt-4o-mini", messages=USER)
            with pytest.raises(openai.AuthenticationError):
                await c.models.list()


async def test_stall_before_headers_times_out_and_shutdown_does_not_hang() -> None:
    fake = FakeOpenAI()
    await fake.start()
    fake.fail_next(Fault.stall())
    async with client(fake, timeout=0.3) as c:
        with pytest.raises(openai.APITimeoutError):
            await c.chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert fake.stalled == 1
    await asyncio.wait_for(fake.stop(), timeout=scaled(5))


async def test_stall_mid_stream_continues_when_released(fake: FakeOpenAI) -> None:
    fake.say("abcdefghi", fault=Fault.stall(after=2))
    task = asyncio.create_task(stream_chunks(fake))
    await fake.wait_for_requests(1)
    await wait_until(lambda: fake.stalled == 1)
    assert not task.done()
    fake.release()
    chunks = await asyncio.wait_for(task, timeout=scaled(5))
    assert "".join(content_of(chunks)) == "abcdefghi"
    assert fake.stalled == 0


async def test_stop_while_a_client_waits_drops_the_connection() -> None:
    fake = FakeOpenAI()
    await fake.start()
    fake.fail_next(Fault.stall())
    async with client(fake, timeout=30) as c:
        call = asyncio.create_task(c.chat.completions.create(model="m", messages=USER))
        await wait_until(lambda: fake.stalled == 1)
        await asyncio.wait_for(fake.stop(), timeout=scaled(5))
        with pytest.raises(openai.APIConnectionError):
            await asyncio.wait_for(call, timeout=scaled(5))


async def test_cut_stream_ends_without_finish_reason(fake: FakeOpenAI) -> None:
    fake.say("this reply is truncated", fault=Fault.cut())
    chunks = await stream_chunks(fake, stream_options={"include_usage": True})
    assert "".join(content_of(chunks)) == "this reply is truncated"
    assert all(ch.choices and ch.choices[0].finish_reason is None for ch in chunks)


async def test_hard_drop_mid_stream_raises_connection_error(fake: FakeOpenAI) -> None:
    fake.say("this reply is dropped", fault=Fault.cut(after=3, hard=True))
    with pytest.raises(openai.APIConnectionError):
        await stream_chunks(fake)


@pytest.mark.parametrize("stream", [False, True])
async def test_malformed_tool_arguments_reach_the_client_verbatim(
    fake: FakeOpenAI, stream: bool
) -> None:
    broken = '{"content": "半个'
    fake.call_tools(ToolCall("memory", broken))
    if stream:
        chunks = await stream_chunks(fake)
        deltas = [ch.choices[0].delta.tool_calls for ch in chunks if ch.choices]
        arguments = "".join(tc[0].function.arguments or "" for tc in deltas if tc)
    else:
        async with client(fake) as c:
            reply = await c.chat.completions.create(model="gpt-4o-mini", messages=USER)
        arguments = reply.choices[0].message.tool_calls[0].function.arguments
    assert arguments == broken
    with pytest.raises(json.JSONDecodeError):
        json.loads(arguments)


async def test_requests_are_recorded(fake: FakeOpenAI) -> None:
    tools = [{"type": "function", "function": {"name": "memory", "parameters": {}}}]
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "记住我"}]
    fake.say("ok")
    async with client(fake) as c:
        await c.chat.completions.create(model="gpt-4o", messages=messages, tools=tools)
    (seen,) = await fake.wait_for_requests(1)
    assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
    assert seen.authorization == "Bearer sk-test"
    assert seen.body["model"] == "gpt-4o"
    assert seen.body["messages"] == messages
    assert seen.body["tools"] == tools


async def test_unscripted_request_fails_unless_echoing() -> None:
    async with FakeOpenAI() as fake, client(fake) as c:
        with pytest.raises(openai.InternalServerError, match="no scripted turn"):
            await c.chat.completions.create(model="m", messages=USER)
    async with FakeOpenAI(echo_when_idle=True) as fake, client(fake) as c:
        reply = await c.chat.completions.create(model="m", messages=USER)
        assert reply.choices[0].message.content == "echo: 你好"


async def test_models_lists_the_configured_ids() -> None:
    async with FakeOpenAI(model_ids=("a-model", "b-model")) as fake, client(fake) as c:
        page = await c.models.list()
    assert [m.id for m in page.data] == ["a-model", "b-model"]


@settings(max_examples=40, deadline=None)
@given(text=st.text(min_size=1, max_size=60), size=st.integers(min_value=1, max_value=7))
def test_any_text_survives_any_chunk_size(text: str, size: int) -> None:
    async def roundtrip() -> list[Any]:
        async with FakeOpenAI(chunk_size=size) as fake:
            fake.say(text)
            return await stream_chunks(fake)

    chunks = asyncio.run(roundtrip())
    assert "".join(content_of(chunks)) == text


def test_standalone_process_serves_and_stops_cleanly() -> None:
    command = [sys.executable, "-m", "tests.fakes.openai", "--port", "0"]
    with subprocess.Popen(command, cwd=ROOT, stdout=PIPE, stderr=PIPE, text=True) as proc:
        try:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            assert line.startswith("listening on http://127.0.0.1:"), line
            body = {"model": "m", "messages": [{"role": "user", "content": "ping"}]}
            request = urllib.request.Request(
                line.split()[-1] + "/v1/chat/completions",
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=5) as response:
                reply = json.load(response)
        finally:
            proc.terminate()
            _, stderr = proc.communicate(timeout=scaled(10))
    assert reply["choices"][0]["message"]["content"] == "echo: ping"
    assert proc.returncode == 0
    assert "Traceback" not in stderr


def test_standalone_script_serves_its_turns_in_order_then_echoes(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    call = {"name": "memory", "arguments": {"action": "add", "content": "喜欢茶"}}
    script.write_text(json.dumps([{"text": "第一"}, {"tool_calls": [call]}]), encoding="utf-8")
    command = [sys.executable, "-m", "tests.fakes.openai", "--port", "0", "--script", str(script)]
    with subprocess.Popen(command, cwd=ROOT, stdout=PIPE, stderr=PIPE, text=True) as proc:
        try:
            url = proc.stdout.readline().split()[-1]  # type: ignore[union-attr]
            replies = [_post_completion(url, text)["choices"][0] for text in ("a", "b", "c")]
        finally:
            proc.terminate()
            proc.communicate(timeout=scaled(10))
    assert replies[0]["message"]["content"] == "第一"
    assert replies[1]["finish_reason"] == "tool_calls"
    function = replies[1]["message"]["tool_calls"][0]["function"]
    assert function["name"] == "memory"
    assert json.loads(function["arguments"]) == call["arguments"]
    assert replies[2]["message"]["content"] == "echo: c"


def test_a_bad_script_is_one_line_naming_the_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('{"text": "not a list"}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"script\.json: TypeError: not a list"):
        load_script(script)
    script.write_text('[{"tool_calls": [{"arguments": {}}]}]', encoding="utf-8")
    with pytest.raises(ValueError, match="KeyError: 'name'"):
        load_script(script)


async def test_a_delayed_turn_outlasts_a_short_client_timeout(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text('[{"text": "slow", "delay": 5}]', encoding="utf-8")
    (turn,) = load_script(script)
    assert turn == Turn(text="slow", delay=5.0)
    fake.add_turn(turn)
    async with client(fake, timeout=0.3) as c:
        with pytest.raises(openai.APITimeoutError):
            await c.chat.completions.create(model="m", messages=USER)


def _post_completion(url: str, text: str) -> Any:
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.load(response)


async def test_finish_reason_can_be_scripted(fake: FakeOpenAI) -> None:
    fake.add_turn(Turn(text="cut short by the model", finish_reason="length"))
    chunks = await stream_chunks(fake)
    assert chunks[-1].choices[0].finish_reason == "length"


async def test_stall_mid_stream_times_out_a_reading_client(fake: FakeOpenAI) -> None:
    fake.say("abcdefghi", fault=Fault.stall(after=2))
    received: list[Any] = []
    async with client(fake, timeout=0.3) as c:
        stream = await c.chat.completions.create(model="m", messages=USER, stream=True)
        with pytest.raises(openai.APITimeoutError):
            async for chunk in stream:
                received.append(chunk)
    assert content_of(received) == ["abc"]  # the role delta and one piece, then silence


async def test_cut_non_streamed_reply_is_a_connection_error(fake: FakeOpenAI) -> None:
    fake.say("never arrives", fault=Fault.cut())
    async with client(fake) as c:
        with pytest.raises(openai.APIConnectionError):
            await c.chat.completions.create(model="m", messages=USER)


# -- audio transcriptions ------------------------------------------------------------------

OGG = b"OggS" + bytes(range(256)) * 20  # the bytes are not decoded: any content will do


async def transcribe(fake: FakeOpenAI, timeout: float = 5.0, **kwargs: Any) -> Any:
    kwargs.setdefault("file", ("voice.ogg", OGG, "audio/ogg"))
    async with client(fake, timeout=timeout) as c:
        return await c.audio.transcriptions.create(model="whisper-1", **kwargs)


async def test_transcription_answers_the_scripted_text_and_records_the_upload(
    fake: FakeOpenAI,
) -> None:
    fake.transcribe("明天早上提醒我买牛奶")
    result = await transcribe(fake, language="zh", prompt="Mnemo")
    assert result.text == "明天早上提醒我买牛奶"
    [seen] = fake.transcriptions
    assert (seen.model, seen.filename, seen.content_type) == ("whisper-1", "voice.ogg", "audio/ogg")
    assert (seen.size, seen.sha256) == (len(OGG), hashlib.sha256(OGG).hexdigest())
    assert (seen.response_format, seen.language, seen.prompt) == ("json", "zh", "Mnemo")
    assert seen.authorization == "Bearer sk-test"
    assert fake.requests == []  # chat requests only: a transcription is not one


async def test_transcription_response_formats(fake: FakeOpenAI) -> None:
    fake.transcribe("plain words")
    fake.transcribe("verbose words", language="chinese", duration=3.5)
    fake.transcribe("subtitle words", duration=2)
    text = await transcribe(fake, response_format="text")
    verbose = await transcribe(fake, response_format="verbose_json")
    srt = await transcribe(fake, response_format="srt")
    assert text.strip() == "plain words"
    assert (verbose.text, verbose.language, verbose.duration) == ("verbose words", "chinese", 3.5)
    assert verbose.segments[0].text.strip() == "verbose words"
    assert "00:00:00,000 --> 00:00:02,000\nsubtitle words" in srt
    assert [t.response_format for t in fake.transcriptions] == ["text", "verbose_json", "srt"]


async def test_unscripted_transcription_echoes_the_file_name_or_fails() -> None:
    async with FakeOpenAI(echo_when_idle=True) as echoing:
        result = await transcribe(echoing, file=("note.m4a", b"m4a", "audio/mp4"))
    assert result.text == "fake transcript of note.m4a"
    async with FakeOpenAI() as silent:
        with pytest.raises(openai.InternalServerError):
            await transcribe(silent)
        assert len(silent.transcriptions) == 1


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, openai.BadRequestError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
    ],
)
async def test_failed_transcription_raises_the_matching_error(
    fake: FakeOpenAI, status: int, error: type[Exception]
) -> None:
    fake.fail_transcription(Fault.http(status, message="audio refused"))
    fake.transcribe("after the failure")
    with pytest.raises(error, match="audio refused") as raised:
        await transcribe(fake)
    assert raised.value.body["message"] == "audio refused"  # type: ignore[attr-defined]
    assert (await transcribe(fake)).text == "after the failure"  # the error took one entry


async def test_failed_transcription_without_fault_is_an_empty_text(fake: FakeOpenAI) -> None:
    fake.fail_transcription()
    assert (await transcribe(fake)).text == ""


async def test_fail_next_does_not_touch_transcriptions(fake: FakeOpenAI) -> None:
    fake.fail_next(Fault.http(500))
    fake.transcribe("heard")
    assert (await transcribe(fake)).text == "heard"
    with pytest.raises(openai.InternalServerError):
        await client(fake).chat.completions.create(model="gpt-4o-mini", messages=USER)


async def test_stalled_transcription_times_out_and_a_cut_one_drops(fake: FakeOpenAI) -> None:
    fake.fail_transcription(Fault.stall())
    with pytest.raises(openai.APITimeoutError):
        await transcribe(fake, timeout=0.3)
    assert fake.stalled == 1
    fake.release()
    fake.fail_transcription(Fault.cut())
    with pytest.raises(openai.APIConnectionError):
        await transcribe(fake)
    await wait_until(lambda: fake.stalled == 0)


@pytest.mark.parametrize(
    ("file", "message"),
    [
        (("voice", OGG, "audio/ogg"), "Invalid file format"),  # no extension
        (("voice.txt", OGG, "text/plain"), "Invalid file format"),
        (("voice.ogg", b"", "audio/ogg"), "Audio file is too short"),
    ],
)
async def test_transcription_refuses_what_the_api_refuses(
    fake: FakeOpenAI, file: tuple[str, bytes, str], message: str
) -> None:
    fake.transcribe("never served")
    with pytest.raises(openai.BadRequestError, match=message):
        await transcribe(fake, file=file)
    assert len(fake.transcriptions) == 1


async def test_transcription_checks_the_api_key_and_the_listed_models() -> None:
    async with FakeOpenAI(api_key="sk-right") as fake:
        with pytest.raises(openai.AuthenticationError):
            await transcribe(fake)
    async with FakeOpenAI(listed_only=True, echo_when_idle=True) as fake:
        with pytest.raises(openai.NotFoundError, match="whisper-1"):
            await transcribe(fake)
    async with FakeOpenAI(
        model_ids=("gpt-4o-mini", "whisper-1"), listed_only=True, echo_when_idle=True
    ) as fake:
        assert (await transcribe(fake)).text == "fake transcript of voice.ogg"


async def test_an_upload_over_the_api_limit_gets_413(fake: FakeOpenAI) -> None:
    big = b"\0" * (25 * 1024 * 1024 + 1)
    with pytest.raises(openai.APIStatusError) as raised:
        await transcribe(fake, file=("big.ogg", big, "audio/ogg"))
    assert raised.value.status_code == 413
    assert fake.transcriptions[0].size == len(big)


# -- image content parts ---------------------------------------------------------------------


def png_data_url(width: int = 4, height: int = 3) -> str:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), "red").save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def with_image(url: str, text: str = "what is in this picture?") -> list[dict[str, Any]]:
    parts = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": parts}]


async def test_image_parts_are_accepted_and_listed() -> None:
    url = png_data_url()
    async with FakeOpenAI(echo_when_idle=True) as fake, client(fake) as c:
        reply = await c.chat.completions.create(model="gpt-4o", messages=with_image(url))
    assert reply.choices[0].message.content == "echo: what is in this picture?"
    assert image_parts(fake.requests[0].body) == [url]
    assert image_parts({"messages": USER}) == []


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("data:image/png;base64,@@@", "Invalid base64"),
        ("data:image/bmp;base64,Qk0=", "unsupported image"),
        ("data:image/png;base64," + base64.b64encode(b"not a png").decode(), "unsupported image"),
        ("file:///etc/passwd", "Invalid image URL"),
    ],
)
async def test_bad_images_are_refused_like_the_api(
    fake: FakeOpenAI, url: str, message: str
) -> None:
    fake.say("never sent")
    async with client(fake) as c:
        with pytest.raises(openai.BadRequestError, match=message):
            await c.chat.completions.create(model="gpt-4o", messages=with_image(url))


async def test_an_image_outside_a_user_message_is_refused(fake: FakeOpenAI) -> None:
    fake.say("never sent")
    messages = with_image(png_data_url())
    messages[1]["role"] = "assistant"
    async with client(fake) as c:
        with pytest.raises(openai.BadRequestError, match="only allowed for messages with role"):
            await c.chat.completions.create(model="gpt-4o", messages=messages)

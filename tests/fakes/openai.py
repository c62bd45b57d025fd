"""A fake OpenAI chat-completions server on 127.0.0.1.

Tests queue scripted turns (`say`, `call_tools`, `add_turn`) and faults
(`fail_next`, or `Turn.fault`); the fake answers ``POST /v1/chat/completions``
with them, as one ``chat.completion`` object or as the SSE stream the real
API sends (wire shapes in TESTING-NOTES.md §3), and ``GET /v1/models`` with
`model_ids` (a completion for another model gets OpenAI's 404 when
`listed_only`); with `api_key` set, any other bearer token gets a 401. Every
request is recorded in `requests`. Clients use ``fake.url + "/v1"`` as their
base URL. Standalone:
``python -m tests.fakes.openai --port N [--script FILE]`` serves the turns of
the JSON script FILE in request order (`load_script`), then echoes the last
user message whenever no turn is queued.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

from tests.fakes.base import FakeServer, json_response, run_standalone, wait_until


@dataclass(frozen=True)
class ToolCall:
    """One tool call; a `str` argument is sent verbatim (malformed JSON too)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass(frozen=True)
class Fault:
    """A misbehaviour; build one with the class methods below."""

    kind: Literal["http", "stall", "cut"]
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    after: int | None = None  # stall/cut: SSE events sent first (None: stall before headers)
    hard: bool = False  # cut: drop the socket instead of ending the body cleanly
    message: str | None = None  # http: the body's error message (default "fake fault N")
    code: str | None = None  # http: the body's error code

    @classmethod
    def http(
        cls,
        status: int,
        retry_after: float | None = None,
        retry_after_ms: int | None = None,
        message: str | None = None,
        code: str | None = None,
    ) -> Fault:
        """An HTTP error with an OpenAI-shaped body and optional retry headers."""
        headers = {} if retry_after is None else {"retry-after": str(retry_after)}
        if retry_after_ms is not None:
            headers["retry-after-ms"] = str(retry_after_ms)
        return cls("http", status=status, headers=headers, message=message, code=code)

    @classmethod
    def stall(cls, after: int | None = None) -> Fault:
        """Hold the response (before headers, or after `after` SSE events) until released."""
        return cls("stall", after=after)

    @classmethod
    def cut(cls, after: int | None = None, hard: bool = False) -> Fault:
        """End the stream after `after` events (None: all deltas), with no finish or [DONE]."""
        return cls("cut", after=after, hard=hard)


@dataclass(frozen=True)
class Turn:
    """One scripted assistant reply."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: tuple[int, int] | None = None  # (prompt_tokens, completion_tokens)
    finish_reason: str | None = None  # None: "tool_calls" when there are calls, else "stop"
    fault: Fault | None = None
    delay: float = 0.0  # seconds the fake waits before answering (a slow model)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any  # parsed JSON, or None

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")


_NOT_SERVED = "The model `{}` does not exist or you do not have access to it."
_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 429: "requests"}


class FakeOpenAI(FakeServer):
    """The chat-completions and models endpoints of an OpenAI-compatible API."""

    def __init__(
        self,
        model_ids: tuple[str, ...] = ("gpt-4o-mini", "gpt-4o"),
        chunk_size: int = 3,
        echo_when_idle: bool = False,
        api_key: str | None = None,
        listed_only: bool = False,
    ) -> None:
        super().__init__()
        self.model_ids = model_ids
        self.listed_only = listed_only  # a completion for a model not in model_ids gets a 404
        self.chunk_size = chunk_size
        self.echo_when_idle = echo_when_idle  # else an unscripted request gets a 500
        self.api_key = api_key  # when set, any other bearer token gets a 401
        self.requests: list[RecordedRequest] = []
        self.stalled = 0  # requests currently held by a stall
        self._turns: deque[Turn] = deque()
        self._faults: deque[Fault] = deque()
        self._release = asyncio.Event()
        self._closing = False

    def setup_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._models)

    # -- scripting -----------------------------------------------------------

    def add_turn(self, turn: Turn) -> None:
        self._turns.append(turn)

    def say(self, text: str, **kwargs: Any) -> None:
        self.add_turn(Turn(text=text, **kwargs))

    def call_tools(self, *calls: ToolCall, text: str = "", **kwargs: Any) -> None:
        self.add_turn(Turn(text=text, tool_calls=calls, **kwargs))

    def fail_next(self, fault: Fault) -> None:
        """The next request to any endpoint gets `fault`; after a stall it is served normally."""
        self._faults.append(fault)

    def release(self) -> None:
        """Let every stalled response continue (call it on the fake's event loop)."""
        self._release.set()
        self._release = asyncio.Event()

    async def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:
        await wait_until(lambda: len(self.requests) >= n, timeout)
        return self.requests

    async def stop(self) -> None:
        self._closing = True  # stalled handlers see this and drop their connection
        self._release.set()
        await super().stop()

    # -- handlers ------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.StreamResponse:
        fault = self._faults.popleft() if self._faults else None
        refused = await self._intake(request, None, fault)
        if refused is not None:
            return refused
        if fault is not None and fault.kind == "cut":
            request.transport.close()  # type: ignore[union-attr]
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.model_ids
        ]
        return json_response({"object": "list", "data": data})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = None
        fault = self._take_fault()
        refused = await self._intake(request, body, fault)
        if refused is not None:
            return refused
        if not isinstance(body, dict):
            return _error(400, "fake OpenAI: the request body is not a JSON object")
        if self.listed_only and body.get("model") not in self.model_ids:
            return _error(404, _NOT_SERVED.format(body.get("model")), code="model_not_found")
        if self._turns:
            turn = self._turns.popleft()
        elif self.echo_when_idle:
            turn = Turn(text=f"echo: {_last_user_text(body.get('messages', []))}")
        else:
            return _error(500, "fake OpenAI: no scripted turn queued")
        if turn.delay > 0:
            await asyncio.sleep(turn.delay)
        completion_id = f"chatcmpl-{len(self.requests)}"
        model = body.get("model", "")
        if body.get("stream"):
            return await self._stream(request, body, turn, fault, completion_id, model)
        if fault is not None and fault.kind == "stall" and fault.after is not None:
            await self._hold(request)  # a reply sent whole can only be held whole
        if fault is not None and fault.kind == "cut":
            request.transport.close()  # type: ignore[union-attr]
        return json_response(_completion(turn, body, completion_id, model))

    def _take_fault(self) -> Fault | None:
        """The next queued fault, else the next turn's; an HTTP error leaves the turn queued."""
        if self._faults:
            return self._faults.popleft()
        turn = self._turns[0] if self._turns else None
        if turn is None or turn.fault is None:
            return None
        if turn.fault.kind == "http":  # the error now, the turn for the retry
            self._turns[0] = replace(turn, fault=None)
        return turn.fault

    async def _intake(
        self, request: web.Request, body: Any, fault: Fault | None
    ) -> web.StreamResponse | None:
        """Record the request, then apply auth, an HTTP fault or a stall before headers."""
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append(RecordedRequest(request.method, request.path, headers, body))
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided", code="invalid_api_key")
        if fault is not None and fault.kind == "http":
            message = fault.message or f"fake fault {fault.status}"
            return _error(fault.status, message, fault.headers, code=fault.code)
        if fault is not None and fault.kind == "stall" and fault.after is None:
            await self._hold(request)
        return None

    async def _hold(self, request: web.Request) -> None:
        self.stalled += 1
        try:
            await self._release.wait()
        finally:
            self.stalled -= 1
        if self._closing:  # shutting down: drop the connection, answer nothing
            if request.transport is not None:
                request.transport.close()
            raise asyncio.CancelledError

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        turn: Turn,
        fault: Fault | None,
        completion_id: str,
        model: str,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        base = _envelope(completion_id, "chat.completion.chunk", model)
        deltas = list(_deltas(turn, self.chunk_size))
        split = len(deltas) if fault is None or fault.after is None else fault.after
        for delta in deltas[:split]:
            await _send(response, {**base, "choices": [_choice(delta)]})
        if fault is not None and fault.kind == "cut":
            if fault.hard:
                request.transport.close()  # type: ignore[union-attr]
            return response  # aiohttp ends the body cleanly: no finish_reason, no [DONE]
        if fault is not None and fault.kind == "stall" and fault.after is not None:
            await self._hold(request)
        for delta in deltas[split:]:
            await _send(response, {**base, "choices": [_choice(delta)]})
        await _send(response, {**base, "choices": [_choice({}, _finish_reason(turn))]})
        if (body.get("stream_options") or {}).get("include_usage"):
            await _send(response, {**base, "choices": [], "usage": _usage(turn, body)})
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _deltas(turn: Turn, size: int) -> Iterator[dict[str, Any]]:
    """Role first, then content pieces, then each call's header and argument pieces."""
    yield {"role": "assistant", "content": ""}
    for piece in _pieces(turn.text, size):
        yield {"content": piece}
    for index, call in enumerate(turn.tool_calls):
        yield {"tool_calls": [{"index": index, **_call_dict(index, call, "")}]}
        for piece in _pieces(call.arguments_json(), size):
            yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


def _pieces(text: str, size: int) -> list[str]:
    # str slicing cuts at code points, so CJK and emoji stay whole characters.
    return [text[i : i + size] for i in range(0, len(text), size)]


async def _send(response: web.StreamResponse, payload: dict[str, Any]) -> None:
    await response.write(f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode())


def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "finish_reason": finish_reason}


def _completion(turn: Turn, body: dict[str, Any], completion_id: str, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.tool_calls:
        calls = enumerate(turn.tool_calls)
        message["tool_calls"] = [_call_dict(i, c, c.arguments_json()) for i, c in calls]
    choice = {"index": 0, "message": message, "logprobs": None}
    choice["finish_reason"] = _finish_reason(turn)
    envelope = _envelope(completion_id, "chat.completion", model)
    return {**envelope, "choices": [choice], "usage": _usage(turn, body)}


def _envelope(completion_id: str, kind: str, model: str) -> dict[str, Any]:
    return {"id": completion_id, "object": kind, "created": int(time.time()), "model": model}


def _call_dict(index: int, call: ToolCall, arguments: str) -> dict[str, Any]:
    function = {"name": call.name, "arguments": arguments}
    return {"id": call.id or f"call_{index}", "type": "function", "function": function}


def _finish_reason(turn: Turn) -> str:
    return turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")


def _usage(turn: Turn, body: dict[str, Any]) -> dict[str, int]:
    if turn.usage is not None:
        prompt, completion = turn.usage
    else:  # a rough, deterministic count: about four characters a token
        prompt = len(json.dumps(body.get("messages", []), ensure_ascii=False)) // 4 + 1
        out = turn.text + "".join(c.arguments_json() for c in turn.tool_calls)
        completion = len(out) // 4 + 1
    total = prompt + completion
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content") or ""
            if isinstance(content, list):  # content parts
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content)
    return ""


def _error(
    status: int, message: str, headers: dict[str, str] | None = None, code: str | None = None
) -> web.Response:
    error_type = _ERROR_TYPES.get(status, "server_error")
    payload = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return json_response(payload, status=status, **(headers or {}))


def load_script(path: Path) -> list[Turn]:
    """The turns of a JSON script: a list of ``{"text": "...", "tool_calls": [{"name":
    "...", "arguments": {...}}], "delay": seconds}`` (all keys optional), served in order."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise TypeError("not a list")
        return [
            Turn(
                text=item.get("text", ""),
                tool_calls=tuple(
                    ToolCall(c["name"], c.get("arguments", {}), c.get("id"))
                    for c in item.get("tool_calls", [])
                ),
                delay=float(item.get("delay", 0.0)),
            )
            for item in data
        ]
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"fake OpenAI script {path}: {type(exc).__name__}: {exc}") from None


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--script", type=Path, help="a JSON list of turns to serve first")


def _standalone(args: argparse.Namespace) -> FakeOpenAI:
    fake = FakeOpenAI(echo_when_idle=True)
    for turn in load_script(args.script) if args.script is not None else []:
        fake.add_turn(turn)
    return fake


if __name__ == "__main__":
    run_standalone(_standalone, "Fake OpenAI chat-completions server", _add_arguments)

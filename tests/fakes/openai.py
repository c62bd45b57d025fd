"""A fake OpenAI chat-completions server on 127.0.0.1.

Tests queue scripted turns (`say`, `call_tools`, `add_turn`) and faults
(`fail_next`, or `Turn.fault`); the fake answers ``POST /v1/chat/completions``
with them, as one ``chat.completion`` object or as the SSE stream the real
API sends (wire shapes in TESTING-NOTES.md §3), and ``GET /v1/models`` with
`model_ids` (a completion for another model gets OpenAI's 404 when
`listed_only`); with `api_key` set, any other bearer token gets a 401. Every
chat and models request is recorded in `requests`. User messages may carry
content parts (text and ``image_url`` data URLs, checked as the API checks
them: images in user messages only, png/jpeg/gif/webp, valid base64, and an
image Pillow can open when Pillow is installed); `image_parts` lists a
request's data URLs.

``POST /v1/audio/transcriptions`` takes the API's multipart form (``file``
with a filename whose extension names the format, ``model``, optional
``response_format`` json|text|srt|verbose_json|vtt, ``language``,
``prompt``) and answers the scripted `transcribe` / `fail_transcription`
entries in order; unscripted, it answers "fake transcript of <filename>"
when `echo_when_idle`, else a 500. Each request is kept in `transcriptions`
(`TranscriptionRequest`: model, filename, content type, size and sha256 of
the bytes, response_format, language, prompt); `fail_next` does not apply to
it. Clients use ``fake.url + "/v1"`` as their base URL. Standalone:
``python -m tests.fakes.openai --port N [--script FILE]`` serves the turns of
the JSON script FILE in request order (`load_script`), then echoes the last
user message whenever no turn is queued.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import hashlib
import io
import json
import re
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from aiohttp import BodyPartReader, web

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

    kind: Literal["http", "stall", "cut", "garbage"]
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

    @classmethod
    def garbage(cls, after: int | None = None) -> Fault:
        """Send an event whose data is not JSON after `after` events (None: all deltas)."""
        return cls("garbage", after=after)


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


@dataclass(frozen=True)
class Transcript:
    """One scripted answer of ``/v1/audio/transcriptions``.

    `duration` None: estimated from the file's size (about 4 kB a second, Opus voice).
    `fault`: an HTTP error (the API's error body), a stall until `release()`, or a cut
    (the connection dropped).
    """

    text: str = ""
    language: str = "english"  # as verbose_json names it
    duration: float | None = None
    fault: Fault | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class TranscriptionRequest:
    """What one transcription request carried (the file's bytes as length and sha256)."""

    model: str | None
    filename: str | None
    content_type: str | None
    size: int
    sha256: str
    response_format: str  # "json" when the request named none
    language: str | None
    prompt: str | None
    authorization: str | None
    fields: dict[str, str]  # every other form field, as sent


AUDIO_FORMATS = ("flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm")
RESPONSE_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
MAX_AUDIO_BYTES = 25 * 1024 * 1024  # the API's upload limit
IMAGE_FORMATS = ("png", "jpeg", "gif", "webp")
_DATA_URL = re.compile(r"^data:([^;,]+);base64,(.*)$", re.DOTALL)
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
        self.transcriptions: list[TranscriptionRequest] = []
        self._transcripts: deque[Transcript] = deque()
        self.stalled = 0  # requests currently held by a stall
        self._turns: deque[Turn] = deque()
        self._faults: deque[Fault] = deque()
        self._release = asyncio.Event()
        self._closing = False

    def setup_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)

    # -- scripting -----------------------------------------------------------

    def add_turn(self, turn: Turn) -> None:
        self._turns.append(turn)

    def say(self, text: str, **kwargs: Any) -> None:
        self.add_turn(Turn(text=text, **kwargs))

    def call_tools(self, *calls: ToolCall, text: str = "", **kwargs: Any) -> None:
        self.add_turn(Turn(text=text, tool_calls=calls, **kwargs))

    def transcribe(self, text: str, **kwargs: Any) -> None:
        """Queue the text the next transcription answers (`Transcript` fields as kwargs)."""
        self._transcripts.append(Transcript(text=text, **kwargs))

    def fail_transcription(self, fault: Fault | None = None) -> None:
        """The next transcription fails with `fault` (``Fault.http(500)``, ``Fault.stall()``,
        ``Fault.cut()``), or, with None, answers an empty text."""
        self._transcripts.append(Transcript(fault=fault))

    async def wait_for_transcriptions(
        self, n: int, timeout: float = 5.0
    ) -> list[TranscriptionRequest]:
        await wait_until(lambda: len(self.transcriptions) >= n, timeout)
        return self.transcriptions

    def fail_next(self, fault: Fault) -> None:
        """The next chat or models request gets `fault`; after a stall it is served normally.
        (Transcriptions are scripted on their own: `fail_transcription`.)"""
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
        if (bad_part := _content_part_error(body.get("messages"))) is not None:
            return bad_part
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

    async def _transcribe(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/audio/transcriptions``: checked like the API, answered from the script."""
        try:
            form, upload = await _read_form(request)
        except ValueError as exc:
            return _error(400, str(exc))
        record = _transcription_request(request, form, upload)
        self.transcriptions.append(record)
        if self.api_key is not None and record.authorization != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided", code="invalid_api_key")
        refused = self._transcription_refusal(record, upload is not None)
        if refused is not None:
            return refused
        if self._transcripts:
            transcript = self._transcripts.popleft()
        elif self.echo_when_idle:
            transcript = Transcript(text=f"fake transcript of {record.filename}")
        else:
            return _error(500, "fake OpenAI: no scripted transcription queued")
        fault = transcript.fault
        if fault is not None and fault.kind == "http":
            message = fault.message or f"fake fault {fault.status}"
            return _error(fault.status, message, fault.headers, code=fault.code)
        if fault is not None and fault.kind == "stall":
            await self._hold(request)
        if fault is not None and fault.kind == "cut":
            request.transport.close()  # type: ignore[union-attr]
        if transcript.delay > 0:
            await asyncio.sleep(transcript.delay)
        return _transcription_answer(transcript, record)

    def _transcription_refusal(
        self, record: TranscriptionRequest, has_file: bool
    ) -> web.Response | None:
        """The API's 400/404/413 for a request it would not transcribe."""
        if not has_file:
            return _error(400, "Missing required parameter: 'file'.")
        if not record.model:
            return _error(400, "you must provide a model parameter")
        if self.listed_only and record.model not in self.model_ids:
            return _error(404, _NOT_SERVED.format(record.model), code="model_not_found")
        if record.size > MAX_AUDIO_BYTES:
            limit = f"Maximum content size limit ({MAX_AUDIO_BYTES}) exceeded"
            return _error(413, f"{limit} ({record.size} bytes read)")
        extension = (record.filename or "").rpartition(".")[2].lower()
        if "." not in (record.filename or "") or extension not in AUDIO_FORMATS:
            formats = ", ".join(repr(f) for f in AUDIO_FORMATS)
            return _error(400, f"Invalid file format. Supported formats: [{formats}]")
        if record.response_format not in RESPONSE_FORMATS:
            formats = ", ".join(repr(f) for f in RESPONSE_FORMATS)
            message = f"Invalid value: '{record.response_format}'. Supported values are: {formats}"
            return _error(400, message)
        if record.size == 0:
            message = "Audio file is too short. Minimum audio length is 0.1 seconds."
            return _error(400, message, code="audio_too_short")
        return None

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
        if fault is not None and fault.kind == "garbage":
            await response.write(b"data: {this is not json\n\n")
        if fault is not None and fault.kind in ("cut", "garbage"):
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
    """The last user message's text; of content parts, the text parts joined."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content") or ""
            if isinstance(content, list):  # content parts: text and image_url
                texts = [p.get("text", "") for p in content if isinstance(p, dict)]
                return "".join(t for t in texts if isinstance(t, str))
            return str(content)
    return ""


async def _read_form(request: web.Request) -> tuple[dict[str, str], _Upload | None]:
    """The multipart form's text fields and the ``file`` part (None: no file part).

    The file is read in chunks (any size, past the server's body limit) and kept only as
    its length and sha256."""
    if not request.content_type.startswith("multipart/form-data"):
        raise ValueError("fake OpenAI: expected a multipart/form-data body")
    fields: dict[str, str] = {}
    upload: _Upload | None = None
    async for part in await request.multipart():
        if not isinstance(part, BodyPartReader) or part.name is None:
            continue
        if part.name == "file":
            digest, size = hashlib.sha256(), 0
            while chunk := await part.read_chunk():
                digest.update(chunk)
                size += len(chunk)
            content_type = part.headers.get("Content-Type")
            upload = _Upload(part.filename, content_type, size, digest.hexdigest())
        else:
            fields[part.name] = await part.text()
    return fields, upload


@dataclass(frozen=True)
class _Upload:
    filename: str | None
    content_type: str | None
    size: int
    sha256: str


def _transcription_request(
    request: web.Request, form: dict[str, str], upload: _Upload | None
) -> TranscriptionRequest:
    named = {"model", "response_format", "language", "prompt"}
    empty = hashlib.sha256(b"").hexdigest()
    return TranscriptionRequest(
        model=form.get("model"),
        filename=upload.filename if upload else None,
        content_type=upload.content_type if upload else None,
        size=upload.size if upload else 0,
        sha256=upload.sha256 if upload else empty,
        response_format=form.get("response_format") or "json",
        language=form.get("language"),
        prompt=form.get("prompt"),
        authorization=request.headers.get("Authorization"),
        fields={k: v for k, v in form.items() if k not in named},
    )


def _transcription_answer(transcript: Transcript, record: TranscriptionRequest) -> web.Response:
    """The answer in the requested format (json, text, srt, verbose_json or vtt)."""
    text, kind = transcript.text, record.response_format
    duration = transcript.duration
    if duration is None:
        duration = round(max(0.1, record.size / 4000), 2)
    if kind == "text":
        return web.Response(text=text + "\n", content_type="text/plain")
    if kind in ("srt", "vtt"):
        end = time.strftime("%H:%M:%S", time.gmtime(duration))
        if kind == "srt":
            body = f"1\n00:00:00,000 --> {end},000\n{text}\n\n"
        else:
            body = f"WEBVTT\n\n00:00:00.000 --> {end}.000\n{text}\n\n"
        return web.Response(text=body, content_type="text/plain")
    if kind == "verbose_json":
        segments = [] if not text else [
            {"id": 0, "seek": 0, "start": 0.0, "end": duration, "text": " " + text,
             "tokens": [], "temperature": 0.0, "avg_logprob": -0.2,
             "compression_ratio": 1.0, "no_speech_prob": 0.01}
        ]  # fmt: skip
        verbose = {"task": "transcribe", "language": transcript.language}
        verbose |= {"duration": duration, "text": text, "segments": segments}
        return json_response(verbose)
    usage = {"type": "duration", "seconds": max(1, round(duration))}
    return json_response({"text": text, "usage": usage})


def image_parts(request_body: Any) -> list[str]:
    """The ``image_url`` URLs (data URLs) in a chat request's messages, in order."""
    urls: list[str] = []
    messages = request_body.get("messages") if isinstance(request_body, dict) else None
    for message in messages or []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, dict) else image
                if isinstance(url, str):
                    urls.append(url)
    return urls


def _content_part_error(messages: Any) -> web.Response | None:
    """The API's 400 for a bad content part: an image outside a user message, a part of
    an unknown type, or an image that is not a png/jpeg/gif/webp data URL (or http URL)."""
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        role = message.get("role")
        for number, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            where = f"messages[{index}].content[{number}]"
            if kind == "text" and isinstance(part.get("text"), str):
                continue
            if kind != "image_url":
                return _error(400, f"Invalid value at '{where}': expected a text or image_url part")
            if role != "user":
                return _error(
                    400,
                    "Image URLs are only allowed for messages with role 'user', but this "
                    f"message with role '{role}' contains an image URL.",
                )
            image = part.get("image_url")
            problem = _image_problem(image.get("url") if isinstance(image, dict) else None)
            if problem is not None:
                return _error(400, problem, code="invalid_image_url")
    return None


def _image_problem(url: Any) -> str | None:
    """Why the API would refuse this image URL, or None."""
    if not isinstance(url, str):
        return "Invalid type for 'image_url.url': expected a string."
    if url.startswith(("https://", "http://")):
        return None
    match = _DATA_URL.match(url)
    if match is None:
        return "Invalid image URL: expected a data URL or an https URL."
    unsupported = (
        "You uploaded an unsupported image. Please make sure your image has one of the "
        f"following formats: {list(IMAGE_FORMATS)}."
    )
    if match.group(1).removeprefix("image/") not in IMAGE_FORMATS:
        return unsupported
    try:
        data = base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        return "Invalid base64 image_url."
    return None if _opens_as_image(data) else unsupported


def _opens_as_image(data: bytes) -> bool:
    """Pillow reads it as an image (True without Pillow: then only the header is checked)."""
    try:
        from PIL import Image
    except ImportError:
        return bool(data)
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
    except Exception:  # Pillow raises many kinds for a broken image
        return False
    return True


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

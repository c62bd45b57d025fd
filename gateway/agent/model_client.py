"""The one module that talks to the OpenAI-compatible model API.

Everything else in the gateway reaches the model through `ModelClient`, so the
`openai` package is imported here only (checked by the architecture test).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import openai

from gateway.agent.limits import ModelCallLimiter
from gateway.errors import (
    ModelAuthError,
    ModelCutOffError,
    ModelError,
    ModelStalledError,
    RequestTooLargeError,
)

if TYPE_CHECKING:
    import httpx2

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call the model asked for; `arguments` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str

    def as_message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class Completion:
    """One finished model reply: its text, the tool calls it asked for, why it stopped."""

    text: str
    tool_calls: tuple[ToolCallRequest, ...]
    finish_reason: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


TextSink = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class PingResult:
    ok: bool
    detail: str


class ModelClient:
    """A thin wrapper around `openai.AsyncOpenAI` for one endpoint.

    Retries are ours, not the `openai` client's (whose own are off), so that
    they are bounded in count (`max_retries`) and in time: a retry is made only
    when it could wait its whole stall window and still start within `timeout`
    seconds of the call. A reply that goes silent for `stall_timeout` seconds
    (no headers, or no next chunk) is abandoned. Nothing is retried once text
    has been passed on, since the person would see it twice.

    Each request holds a slot of the shared `limiter` (when given) while it
    runs, never while waiting to retry; a `background` client's requests
    (recaps, compression, review) yield to replies. Time spent waiting for a
    slot does not count against `timeout`. `http_client` replaces the HTTP
    transport (benchmarks give it an in-process fake endpoint).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout: float,
        max_retries: int = 2,
        stall_timeout: float = 30.0,
        *,
        limiter: ModelCallLimiter | None = None,
        background: bool = False,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        self.model = model
        self.background = background
        self._limiter = limiter
        self._timeout = timeout
        self._stall_timeout = stall_timeout
        self._max_retries = max_retries
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            # Local servers often need no key; the client insists on a value.
            api_key=api_key or "not-set",
            timeout=timeout,
            max_retries=0,
            http_client=http_client,
        )

    @property
    def limiter(self) -> ModelCallLimiter | None:
        """The limit on model calls in flight this client shares (None: unlimited)."""
        return self._limiter

    async def ping(self) -> PingResult:
        """Ask the endpoint for its model list: does it answer, and accept us?"""
        try:
            page = await self._client.models.list()
        except openai.AuthenticationError as exc:
            return PingResult(False, f"answers but rejected the API key (HTTP {exc.status_code})")
        except openai.NotFoundError:
            return PingResult(True, "answers (no /models endpoint)")
        except openai.APIStatusError as exc:
            return PingResult(False, f"answered HTTP {exc.status_code}")
        except openai.APITimeoutError:
            return PingResult(False, "timed out")
        except openai.APIConnectionError as exc:
            return PingResult(False, f"unreachable ({exc.__cause__ or exc})")
        except openai.OpenAIError as exc:
            return PingResult(False, f"failed ({exc})")
        names = [m.id for m in page.data]
        if self.model in names:
            return PingResult(True, f"answers; model {self.model!r} is listed")
        return PingResult(True, f"answers; model {self.model!r} not in its list of {len(names)}")

    async def stream_chat(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] = (),
        on_text: TextSink | None = None,
    ) -> Completion:
        """Stream one reply, passing each text delta to `on_text`, and return it whole.

        Tool-call deltas are accumulated by index. Failures raise `ModelError`
        or one of its subclasses: `ModelStalledError`, `ModelCutOffError` (the
        stream ended without a `finish_reason`, or broke), `ModelAuthError`,
        `RequestTooLargeError`. The message holds the upstream detail, for the log.
        """
        body = stream_body(self.model, messages, tools)
        clock = _Clock()
        attempt = 0
        while True:
            passed = _Passed(on_text)
            try:
                async with self._slot(clock, self.background):
                    return await self._attempt(body, passed)
            except ModelError as exc:
                delay = self._retry_delay(exc, attempt, passed.any, clock.elapsed())
                if delay is None:
                    raise
                log.info("model call failed (%s); retry %d in %.1f s", exc, attempt + 1, delay)
            await asyncio.sleep(delay)
            attempt += 1

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        background: bool | None = None,
    ) -> str:
        """One non-streamed reply's text, for background work (recaps, compression).

        The same bounded retries as `stream_chat`; the whole reply may take up
        to `timeout` seconds (there is no stream to watch for a stall). Failures
        raise `ModelError` or a subclass; an empty reply is returned as "".
        `background` overrides the client's priority for this call (a recap a
        reply waits for is foreground work).
        """
        kwargs = _request(self.model, messages, ())
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        low = self.background if background is None else background
        clock = _Clock()
        attempt = 0
        while True:
            try:
                async with self._slot(clock, low):
                    response = await self._client.chat.completions.create(**kwargs)
            except openai.APIError as exc:
                error = _model_error(exc, False, self._timeout)
                delay = self._retry_delay(error, attempt, False, clock.elapsed())
                if delay is None:
                    raise error from exc
                log.info("model call failed (%s); retry %d in %.1f s", error, attempt + 1, delay)
                await asyncio.sleep(delay)
                attempt += 1
                continue
            if not response.choices:
                return ""
            return response.choices[0].message.content or ""

    @contextlib.asynccontextmanager
    async def _slot(self, clock: _Clock, background: bool) -> AsyncIterator[None]:
        """A slot of the shared limiter for one request; the wait is kept off `clock`."""
        if self._limiter is None:
            yield
            return
        queued = time.monotonic()
        async with self._limiter.slot(background=background):
            clock.exclude(time.monotonic() - queued)
            yield

    async def _attempt(self, body: bytes, passed: _Passed) -> Completion:
        """One request of the encoded `body`: give up when the endpoint is silent for the
        stall timeout. The chunks come as the JSON objects they are (see `stream_body`)."""
        acc = _StreamAccumulator()
        try:
            stream = await self._unless_stalled(
                self._client.post(
                    "/chat/completions",
                    cast_to=object,
                    content=body,
                    options={"security": {"bearer_auth": True}},
                    stream=True,
                    stream_cls=openai.AsyncStream[object],
                )
            )
            async with stream:
                chunks = aiter(stream)
                while (chunk := await self._unless_stalled(anext(chunks, None))) is not None:
                    acc.started = True
                    piece = acc.add(chunk)
                    if piece:
                        await passed(piece)  # the sink's own time is not the model's silence
        except openai.APIError as exc:
            raise _model_error(exc, acc.started, self._timeout) from exc
        return acc.result()

    async def _unless_stalled(self, step: Awaitable[T]) -> T:
        """Await `step`, abandoning it after `stall_timeout` seconds of silence."""
        try:
            async with asyncio.timeout(self._stall_timeout):
                return await step
        except TimeoutError as exc:
            raise ModelStalledError(
                f"no answer from the model for {self._stall_timeout:g} s (stalled)"
            ) from exc

    def _retry_delay(
        self, exc: ModelError, attempt: int, passed_text: bool, elapsed: float
    ) -> float | None:
        """Seconds to wait before trying again, or None when this failure is final."""
        if passed_text or attempt >= self._max_retries or not _retryable(exc):
            return None
        delay = exc.retry_after if exc.retry_after is not None else min(0.5 * 2**attempt, 8.0)
        if elapsed + delay + self._stall_timeout > self._timeout:
            return None  # the retry could not run its course inside the budget
        return delay

    async def close(self) -> None:
        await self._client.close()


class EncodedMessage(dict[str, Any]):
    """A request message that never changes, with its JSON encoded once (`json`).

    A session's history goes out again in every request of every turn; its
    messages are encoded when first kept (`SentHistory`) and `stream_body`
    reuses the bytes. A change would leave them stale, so changes are refused.
    """

    __slots__ = ("json",)

    def __init__(self, message: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.json = _dumps(self)

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("an EncodedMessage never changes; copy it with dict() to change it")

    __setitem__ = __delitem__ = _refuse
    update = pop = popitem = clear = setdefault = __ior__ = _refuse


def stream_body(
    model: str, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
) -> bytes:
    """A streamed request's body, byte for byte what `chat.completions.create` sent for
    `_request`'s arguments with ``stream`` and ``stream_options`` (same keys, same order,
    same encoding), but encoded by us: an `EncodedMessage` goes as its bytes.

    Through `create`, the `openai` client walks its own parameters against
    their type hints, merges `extra_body` and encodes the whole every time (about
    1 ms per 1,000 messages); and it builds each streamed chunk into a typed
    object (about 0.2 ms each). Posted as bytes, with the chunks taken as the
    JSON objects they are, a turn pays for neither.
    """
    parts = [m.json if isinstance(m, EncodedMessage) else _dumps(m) for m in messages]
    body = [b'{"model":', _dumps(model), b',"stream":true,"messages":[', b",".join(parts)]
    body.append(b'],"stream_options":{"include_usage":true}')
    if tools:
        body += [b',"tools":', _dumps(list(tools))]
    body.append(b"}")
    return b"".join(body)


def _text(value: object) -> str:
    """A streamed string field; anything else (a malformed chunk) counts as nothing."""
    return value if isinstance(value, str) else ""


def _dumps(value: object) -> bytes:
    """JSON as the `openai` client encodes a body: compact, UTF-8, no NaN."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _request(
    model: str, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """`create` arguments (for `complete`) with the messages and tools passed as they are,
    in `extra_body`; `stream_body` gives the same bytes for a streamed request.

    Ours are already in the API's wire shape; given as typed parameters, the
    `openai` client walks every nested value of them against its type hints
    first, which cost about 14 ms per request of a 20-message session with
    five tools (bench/turns.py), more than the rest of the turn together.
    """
    body: dict[str, Any] = {"messages": list(messages)}
    if tools:
        body["tools"] = list(tools)
    return {"model": model, "messages": [], "extra_body": body}


class _Clock:
    """Time since a call began, less the time it spent waiting for a slot."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._excluded = 0.0

    def exclude(self, seconds: float) -> None:
        self._excluded += seconds

    def elapsed(self) -> float:
        return time.monotonic() - self._started - self._excluded


class _StreamAccumulator:
    """Builds a `Completion` from streamed chunks (the JSON objects the API sends)."""

    def __init__(self) -> None:
        self.started = False  # a chunk arrived: a later failure cut the reply off
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] = {}

    def add(self, chunk: object) -> str:
        if not isinstance(chunk, dict):
            return ""
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            return ""
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = {}
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, dict):  # anything else is not a call: skipped, never a crash
                self._add_call(call)
        piece = delta.get("content")
        if not isinstance(piece, str) or not piece:
            return ""
        self.text.append(piece)
        return piece

    def _add_call(self, call: dict[str, Any]) -> None:
        slot = self.calls.setdefault(
            call.get("index") or 0, {"id": "", "name": "", "arguments": ""}
        )
        if isinstance(call.get("id"), str) and call["id"]:
            slot["id"] = call["id"]
        function = call.get("function")
        if isinstance(function, dict):
            slot["name"] += _text(function.get("name"))
            slot["arguments"] += _text(function.get("arguments"))

    def result(self) -> Completion:
        if self.finish_reason is None:
            raise ModelCutOffError("model stream ended without a finish_reason (truncated reply)")
        calls = tuple(
            ToolCallRequest(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
            for i, c in sorted(self.calls.items())
        )
        return Completion(
            text="".join(self.text),
            tool_calls=calls,
            finish_reason=self.finish_reason,
            prompt_tokens=self.usage.get("prompt_tokens"),
            completion_tokens=self.usage.get("completion_tokens"),
        )


class _Passed:
    """Passes text on to the caller's sink and remembers whether any went."""

    def __init__(self, sink: TextSink | None) -> None:
        self._sink = sink
        self.any = False

    async def __call__(self, piece: str) -> None:
        self.any = True
        if self._sink is not None:
            await self._sink(piece)


# Phrases that OpenAI-compatible servers use when the prompt exceeds the context.
_TOO_LONG_PHRASES = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "prompt is too long",
    "too many tokens",
)


def _model_error(exc: openai.APIError, started: bool, timeout: float) -> ModelError:
    """Our error for an `openai` one; the message keeps the upstream detail for the log."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = f"model API error: HTTP {status}: {exc.message}"
        if status in (401, 403):
            return ModelAuthError(detail, status=status)
        if status == 413 or (status == 400 and _says_too_long(exc)):
            return RequestTooLargeError(detail, status=status)
        return ModelError(detail, status=status, retry_after=_retry_after(exc))
    if isinstance(exc, openai.APITimeoutError):
        return ModelStalledError(f"no answer from the model for {timeout:g} s (timed out)")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        if started:
            return ModelCutOffError(f"model stream broke off: {cause}")
        return ModelError(f"model API unreachable: {cause}")
    # An error event inside the stream.
    where = "mid-stream" if started else "before the reply"
    return (ModelCutOffError if started else ModelError)(f"model API error {where}: {exc.message}")


def _says_too_long(exc: openai.APIStatusError) -> bool:
    text = f"{exc.code or ''} {exc.message}".lower()
    return any(phrase in text for phrase in _TOO_LONG_PHRASES)


def _retryable(exc: ModelError) -> bool:
    """Worth another try: silence, a broken stream, no connection, 408/409/429/5xx."""
    if isinstance(exc, ModelAuthError | RequestTooLargeError):
        return False
    if exc.status is None:
        return True
    return exc.status in (408, 409, 429) or exc.status >= 500


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """The server's retry-after-ms or retry-after (in seconds; an HTTP date is ignored)."""
    headers = exc.response.headers if exc.response is not None else {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None

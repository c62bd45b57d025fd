"""The one module that talks to the OpenAI-compatible model API.

Everything else in the gateway reaches the model through `ModelClient`, so the
`openai` package is imported here only (checked by the architecture test).
It holds the HTTP side: the requests, the stall watch, the one retry loop
both kinds of call run under, and `openai`'s errors as ours. What the bytes
of a request and the chunks of a reply are is `wire`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import openai

from gateway.agent.limits import ModelCallLimiter
from gateway.agent.wire import Completion, StreamAccumulator, create_arguments, stream_body
from gateway.errors import (
    ModelAuthError,
    ModelCutOffError,
    ModelError,
    ModelStalledError,
    ModelUnreadableError,
    RequestTooLargeError,
)
from gateway.urls import redact_url_credentials

if TYPE_CHECKING:
    import httpx2
    from openai.types.chat import ChatCompletion

log = logging.getLogger(__name__)
T = TypeVar("T")


TextSink = Callable[[str], Awaitable[None]]


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
        on_call: Callable[[float, BaseException | None], None] | None = None,
    ) -> None:
        """`on_call` is told of each request: its seconds and the error that ended it."""
        self.model = model
        self._on_call = on_call
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

    async def served_models(self) -> list[str]:
        """The model ids the endpoint lists (``GET /models``, with the key).

        Failures raise `ModelError` or a subclass, as a chat call's do.
        """
        try:
            page = await self._client.models.list()
        except openai.APIError as exc:
            raise _model_error(exc, False, self._timeout) from exc
        return [m.id for m in page.data]

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
        `RequestTooLargeError`, `ModelUnreadableError` (a chunk that is not JSON; not
        retried). The message holds the upstream detail, for the log.
        """
        body = stream_body(self.model, messages, tools)
        # One sink for every attempt: once text has passed, a failure is final, so no
        # attempt after the first starts with text already passed.
        passed = _Passed(on_text)
        return await self._retrying(
            lambda: self._attempt(body, passed), self.background, lambda: passed.any
        )

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
        kwargs = create_arguments(self.model, messages, ())
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        low = self.background if background is None else background
        response = await self._retrying(lambda: self._create(kwargs), low, lambda: False)
        if not response.choices:
            return ""
        return response.choices[0].message.content or ""

    async def transcribe(self, audio: bytes, *, filename: str, mime: str | None) -> str:
        """What the recording `audio` says (``POST /audio/transcriptions``, multipart: the
        bytes as `filename`, whose extension names the format, and `mime`).

        The same bounded retries, slot and `timeout` as `complete`; failures raise
        `ModelError` or a subclass; silence is returned as "".
        """
        upload = (filename, audio, mime or "application/octet-stream")
        return await self._retrying(
            lambda: self._transcribe(upload), self.background, lambda: False
        )

    async def _retrying(
        self, attempt: Callable[[], Awaitable[T]], background: bool, passed_text: Callable[[], bool]
    ) -> T:
        """Run `attempt`, each time in a slot, until it succeeds or its failure is final.

        The retry policy is the class docstring's (`_retry_delay`); `passed_text`
        says whether the attempt that failed had passed text on.
        """
        clock = _Clock()
        tries = 0
        while True:
            try:
                async with self._slot(clock, background):
                    return await self._timed(attempt)
            except ModelError as exc:
                delay = self._retry_delay(exc, tries, passed_text(), clock.elapsed())
                if delay is None:
                    raise
                log.info("model call failed (%s); retry %d in %.1f s", exc, tries + 1, delay)
            await asyncio.sleep(delay)
            tries += 1

    async def _timed(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """One request, told to `on_call` (a cancelled one is not: it did not end)."""
        if self._on_call is None:
            return await attempt()
        began = time.monotonic()
        try:
            result = await attempt()
        except Exception as exc:  # told, then raised on unchanged
            self._on_call(time.monotonic() - began, exc)
            raise
        self._on_call(time.monotonic() - began, None)
        return result

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
        acc = StreamAccumulator()
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
        except json.JSONDecodeError as exc:  # the SSE data of a chunk, read by `openai`
            where = "mid-stream" if acc.started else "before the reply"
            raise ModelUnreadableError(
                f"model API sent a stream chunk that is not JSON {where}: {exc}"
            ) from None  # the detail is the line: no traceback of `openai`'s inner workings
        return acc.result()

    async def _create(self, kwargs: dict[str, Any]) -> ChatCompletion:
        """One non-streamed request; an `openai` failure is raised as our `ModelError`."""
        try:
            response: ChatCompletion = await self._client.chat.completions.create(**kwargs)
        except openai.APIError as exc:
            raise _model_error(exc, False, self._timeout) from exc
        return response

    async def _transcribe(self, upload: tuple[str, bytes, str]) -> str:
        """One transcription request, within `timeout` (an upload has no stream to watch)."""
        try:
            async with asyncio.timeout(self._timeout):
                result = await self._client.audio.transcriptions.create(
                    model=self.model, file=upload
                )
        except TimeoutError as exc:
            raise ModelStalledError(
                f"no transcript from the model for {self._timeout:g} s (timed out)"
            ) from exc
        except openai.APIError as exc:
            raise _model_error(exc, False, self._timeout) from exc
        text = result if isinstance(result, str) else getattr(result, "text", "")
        return text if isinstance(text, str) else ""

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


class _Clock:
    """Time since a call began, less the time it spent waiting for a slot."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._excluded = 0.0

    def exclude(self, seconds: float) -> None:
        self._excluded += seconds

    def elapsed(self) -> float:
        return time.monotonic() - self._started - self._excluded


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
        if status == 404:  # most often a base URL without /v1: say where the request went
            detail = f"model API error: HTTP 404 from {_request_line(exc)}: {exc.message}"
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


def _request_line(exc: openai.APIStatusError) -> str:
    """``POST https://host/path`` of the request that failed, URL credentials masked."""
    request = exc.response.request
    return redact_url_credentials(f"{request.method} {request.url}")


def _says_too_long(exc: openai.APIStatusError) -> bool:
    text = f"{exc.code or ''} {exc.message}".lower()
    return any(phrase in text for phrase in _TOO_LONG_PHRASES)


def _retryable(exc: ModelError) -> bool:
    """Worth another try: silence, a broken stream, no connection, 408/409/429/5xx."""
    if isinstance(exc, ModelAuthError | RequestTooLargeError | ModelUnreadableError):
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

"""The one module that talks to the OpenAI-compatible model API.

Everything else in the gateway reaches the model through `ModelClient`, so the
`openai` package is imported here only (checked by the architecture test).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import openai

from gateway.errors import ModelError


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
    """A thin wrapper around `openai.AsyncOpenAI` for one endpoint."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout: float,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            # Local servers often need no key; the client insists on a value.
            api_key=api_key or "not-set",
            timeout=timeout,
            max_retries=max_retries,
        )

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

        Tool-call deltas are accumulated by index. A stream that ends without a
        `finish_reason` was cut off: that raises `ModelError`, like any API error.
        """
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            kwargs["tools"] = list(tools)
        acc = _StreamAccumulator()
        try:
            stream = await self._client.chat.completions.create(**kwargs)
            async for chunk in stream:
                piece = acc.add(chunk)
                if piece and on_text is not None:
                    await on_text(piece)
        except openai.APIStatusError as exc:
            raise ModelError(
                f"model API error: HTTP {exc.status_code}: {exc.message}",
                status=exc.status_code,
                retry_after=_retry_after(exc),
            ) from exc
        except openai.APITimeoutError as exc:
            raise ModelError("model API timed out") from exc
        except openai.APIConnectionError as exc:
            raise ModelError(f"model API unreachable: {exc.__cause__ or exc}") from exc
        return acc.result()

    async def close(self) -> None:
        await self._client.close()


class _StreamAccumulator:
    """Builds a `Completion` from streamed chunks."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None

    def add(self, chunk: Any) -> str:
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        if not chunk.choices:
            return ""
        choice = chunk.choices[0]
        if choice.finish_reason:
            self.finish_reason = choice.finish_reason
        delta = choice.delta
        for call in delta.tool_calls or ():
            slot = self.calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            if call.id:
                slot["id"] = call.id
            if call.function is not None:
                slot["name"] += call.function.name or ""
                slot["arguments"] += call.function.arguments or ""
        piece = delta.content or ""
        if piece:
            self.text.append(piece)
        return piece

    def result(self) -> Completion:
        if self.finish_reason is None:
            raise ModelError("model stream ended without a finish_reason (truncated reply)")
        calls = tuple(
            ToolCallRequest(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
            for i, c in sorted(self.calls.items())
        )
        return Completion(
            text="".join(self.text),
            tool_calls=calls,
            finish_reason=self.finish_reason,
            prompt_tokens=getattr(self.usage, "prompt_tokens", None),
            completion_tokens=getattr(self.usage, "completion_tokens", None),
        )


def _retry_after(exc: openai.APIStatusError) -> float | None:
    header = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return float(header) if header is not None else None
    except ValueError:
        return None

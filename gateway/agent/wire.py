"""The chat-completions wire format: request bodies as bytes, streamed chunks as a reply.

What goes out (`stream_body`, with `EncodedMessage` for messages encoded
once, and `create_arguments` for a non-streamed request) and what comes back
(`StreamAccumulator` builds a `Completion` from the chunks, and
`ToolCallRequest` is one tool call in it) are plain JSON work, with no I/O.
The HTTP calls, stalls and retries around them are `model_client`'s, the one
module that imports `openai`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from gateway.errors import ModelCutOffError


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
    `create_arguments`'s arguments with ``stream`` and ``stream_options`` (same keys,
    same order, same encoding), but encoded by us: an `EncodedMessage` goes as its bytes.

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


def create_arguments(
    model: str, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """`create` arguments (for `ModelClient.complete`) with the messages and tools passed
    as they are, in `extra_body`; `stream_body` gives the same bytes for a streamed request.

    Ours are already in the API's wire shape; given as typed parameters, the
    `openai` client walks every nested value of them against its type hints
    first, which cost about 14 ms per request of a 20-message session with
    five tools (bench/turns.py), more than the rest of the turn together.
    """
    body: dict[str, Any] = {"messages": list(messages)}
    if tools:
        body["tools"] = list(tools)
    return {"model": model, "messages": [], "extra_body": body}


class StreamAccumulator:
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

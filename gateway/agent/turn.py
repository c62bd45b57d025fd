"""One turn of the agent: the model call, the tool loop, and scrubbed streaming.

The turn knows no platform. It takes the frozen system prompt, the history of
the session, the user's text and the recalled context (appended to the user
message for this request only), streams the model's reply through the
`<memory-context>` scrubber to a text sink, runs the tools the model asks for,
and returns every message of the turn for the caller to store.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.agent.model_client import Completion, ModelClient, TextSink
from memory_core import StreamingContextScrubber, append_memory_context, scrub_context

log = logging.getLogger(__name__)

ToolHandler = Callable[[Mapping[str, Any]], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its OpenAI schema and an async handler returning JSON."""

    schema: dict[str, Any]
    handler: ToolHandler

    @property
    def name(self) -> str:
        return str(self.schema["function"]["name"])


@dataclass
class TurnResult:
    """What one turn produced: the reply shown, and the messages to store."""

    reply: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False


class Agent:
    """Runs turns against one model with one fixed set of tools."""

    def __init__(self, model: ModelClient, tools: Sequence[Tool], max_steps: int = 8) -> None:
        self._model = model
        self._tools = {tool.name: tool for tool in tools}
        self._max_steps = max_steps

    async def run_turn(
        self,
        system_prompt: str,
        history: Sequence[dict[str, Any]],
        user_text: str,
        recalled: str,
        on_text: TextSink,
        stored: list[dict[str, Any]] | None = None,
    ) -> TurnResult:
        """Run one turn; `history` holds earlier messages of the session (no system one).

        Every message of the turn is appended to `stored` as it happens (the
        user's first), so a caller can still save what was done when a later
        model call fails.
        """
        user_message = {"role": "user", "content": user_text}
        request_user = {"role": "user", "content": append_memory_context(user_text, recalled)}
        stored = [] if stored is None else stored
        stored.append(user_message)
        sent: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt},
            *history,
            request_user,
        ]
        schemas = [tool.schema for tool in self._tools.values()]
        for _ in range(self._max_steps):
            completion = await self._complete(sent, schemas, on_text)
            assistant = _assistant_message(completion)
            stored.append(assistant)
            sent.append(assistant)
            if not completion.tool_calls:
                return TurnResult(reply=assistant["content"] or "", messages=stored)
            for call in completion.tool_calls:
                result = await self._run_tool(call.name, call.arguments)
                tool_message = {"role": "tool", "tool_call_id": call.id, "content": result}
                tool_message["name"] = call.name
                stored.append(tool_message)
                sent.append(tool_message)
        note = "(stopped: too many tool steps in one turn)"
        await on_text(note)
        stored.append({"role": "assistant", "content": note})
        return TurnResult(reply=note, messages=stored, truncated=True)

    async def _complete(
        self, messages: list[dict[str, Any]], schemas: list[dict[str, Any]], on_text: TextSink
    ) -> Completion:
        scrubber = StreamingContextScrubber()

        async def scrubbed(piece: str) -> None:
            safe = scrubber.feed(piece)
            if safe:
                await on_text(safe)

        completion = await self._model.stream_chat(messages, schemas, on_text=scrubbed)
        tail = scrubber.flush()
        if tail:
            await on_text(tail)
        return completion

    async def _run_tool(self, name: str, raw_arguments: str) -> str:
        tool = self._tools.get(name)
        if tool is None:
            return json.dumps({"success": False, "error": f"unknown tool {name!r}"})
        try:
            arguments = json.loads(raw_arguments or "{}")
        except ValueError as exc:
            return json.dumps({"success": False, "error": f"arguments are not valid JSON: {exc}"})
        if not isinstance(arguments, dict):
            return json.dumps({"success": False, "error": "arguments must be a JSON object"})
        try:
            return await tool.handler(arguments)
        except Exception as exc:  # a tool's bug must not end the turn
            log.exception("tool %s failed", name)
            return json.dumps({"success": False, "error": f"tool {name} failed: {exc}"})


def _assistant_message(completion: Completion) -> dict[str, Any]:
    # What the person saw: the model's echo of a recall block is never stored either.
    message: dict[str, Any] = {
        "role": "assistant",
        "content": scrub_context(completion.text) or None,
    }
    if completion.tool_calls:
        message["tool_calls"] = [call.as_message() for call in completion.tool_calls]
    return message

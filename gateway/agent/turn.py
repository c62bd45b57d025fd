"""One turn of the agent: the model call, the tool loop, and scrubbed streaming.

The turn knows no platform. It takes the frozen system prompt, the history of
the session, the user's text and the recalled context (appended to the user
message for this request only) and the pictures of the user's message (sent
as ``image_url`` content parts beside its text, in this turn's requests only;
the stored message is its text), streams the model's reply through the
`<memory-context>` scrubber to a text sink, runs the tools the model asks for,
and returns a `TurnResult`: every message of the turn, in order, for the
caller to store. A model failure part-way ends the turn early with the
failure recorded, so the steps already taken are still returned.

The tool calls of one model reply run in order, except that consecutive
read-only calls run concurrently; their results are always appended in the
order of the calls. At most `max_steps` model replies asking for tools are
answered in one turn.

The person never sees a blank reply or upstream error text: an empty or
filtered reply, or one cut off after some text was shown, gets a short note
(the `*_NOTE` lines, shown in the person's language), and what was shown is
what is stored, with the note in English (what the model reads later never
changes with the person's language). `fault_notice` gives the one line for a
failure that showed nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gateway.agent.model_client import ModelClient, TextSink
from gateway.agent.tools import Tool
from gateway.agent.wire import Completion, EncodedMessage, ToolCallRequest
from gateway.errors import (
    ModelAuthError,
    ModelError,
    ModelUnreadableError,
    RequestTooLargeError,
)
from gateway.i18n import N_
from memory_core import (
    StreamingContextScrubber,
    append_memory_context,
    decode_arguments,
    scrub_context,
)

log = logging.getLogger(__name__)

# The notes a person may see. Each is shown in the person's language (`Agent`'s
# `translate`) and stored in English, as the model reads it in later turns: a
# session's stored bytes never depend on the language setting of the day.
STEP_LIMIT_NOTE = N_("(stopped: too many tool steps in one turn)")
CUT_NOTE = N_("(the reply was cut off; please ask again)")
EMPTY_NOTE = N_("(the model returned an empty reply)")
FILTERED_NOTE = N_("(the model's provider filtered this reply)")
LENGTH_NOTE = N_("(the reply reached the model's length limit)")
NOT_ANSWERING_NOTE = N_("(the model is not answering right now; please try again in a moment)")
BUSY_NOTE = N_("(the model service is busy right now; please try again in a moment)")
CREDENTIALS_NOTE = N_("(the model service rejected our credentials; the operator has been told)")
REFUSED_NOTE = N_("(the model service refused this request; the operator can see why in the log)")
TOO_LONG_NOTE = N_(
    "(this conversation has grown too long for the model, so I started a fresh one — "
    "I still remember you; please send that again)"
)
UNREADABLE_NOTE = N_(
    "(the model's server sent something I could not read; please try again in a moment)"
)
MESSAGE_TOO_LONG_NOTE = N_("(that message is too long for the model; please send a shorter one)")
Translate = Callable[[str], str]
"""A note in the person's language (`PersonLocale._`)."""


def fault_notice(error: ModelError) -> str:
    """The short line a person sees for a failed model call (a catalog message: shown
    translated, kept in English); the detail is for the log."""
    if isinstance(error, ModelAuthError):
        return CREDENTIALS_NOTE
    if isinstance(error, RequestTooLargeError):
        return TOO_LONG_NOTE
    if isinstance(error, ModelUnreadableError):
        return UNREADABLE_NOTE
    if error.status == 429:
        return BUSY_NOTE
    if error.status is not None and 400 <= error.status < 500 and error.status not in (408, 409):
        return REFUSED_NOTE
    return NOT_ANSWERING_NOTE


def user_content(text: str, images: Sequence[str] = ()) -> str | list[dict[str, Any]]:
    """A user message's request content: its text, or with pictures the content parts (the
    text first, then each picture as an ``image_url`` part, the model choosing the detail)."""
    if not images:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": url, "detail": "auto"}} for url in images]
    return parts


@dataclass(frozen=True)
class TurnMessage:
    """One message of a turn, as stored: the user's, the model's, or a tool result."""

    role: Literal["user", "assistant", "tool"]
    content: str | None
    tool_calls: tuple[ToolCallRequest, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None

    def as_request(self) -> dict[str, Any]:
        """The message in the shape the chat-completions API takes."""
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.as_message() for call in self.tool_calls]
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        if self.tool_name is not None:
            message["name"] = self.tool_name
        return message


@dataclass(frozen=True)
class TurnResult:
    """What one turn produced.

    `messages` starts with the user's message. `error` is set when a model
    call failed part-way; `messages` then holds the steps taken before it.
    """

    reply: str
    messages: tuple[TurnMessage, ...]
    truncated: bool = False
    error: ModelError | None = None


class Agent:
    """Runs turns against one model with one fixed set of tools.

    `max_steps` bounds the model replies with tool calls one turn answers
    (`llm.max_tool_steps`); past it the turn ends with `STEP_LIMIT_NOTE`. `translate`
    gives a note in the person's language, as shown (stored, it stays English).
    """

    def __init__(
        self,
        model: ModelClient,
        tools: Sequence[Tool],
        max_steps: int = 20,
        translate: Translate | None = None,
    ) -> None:
        self._model = model
        self._tools = {tool.name: tool for tool in tools}
        self._max_steps = max_steps
        self._translate: Translate = translate if translate is not None else _same

    async def run_turn(
        self,
        system_prompt: str,
        history: Sequence[Mapping[str, Any]],
        user_text: str,
        recalled: str,
        on_text: TextSink,
        *,
        images: Sequence[str] = (),
    ) -> TurnResult:
        """Run one turn; `history` holds earlier messages of the session (no system one);
        `images`: ``data:`` URLs of the pictures the user's message carried."""
        done = [TurnMessage("user", user_text)]
        text = append_memory_context(user_text, recalled)
        request_user = {"role": "user", "content": user_content(text, images)}
        sent: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt},
            *(m if isinstance(m, EncodedMessage) else dict(m) for m in history),  # never change
            request_user,
        ]
        schemas = [tool.schema for tool in self._tools.values()]
        on_text = _Paragraphs(on_text)
        for _ in range(self._max_steps):
            on_text.next_step()
            shown = _Shown(on_text, self._translate)
            try:
                completion = await self._complete(sent, schemas, shown)
            except ModelError as exc:
                return await _failed(done, shown, exc)
            assistant = await _assistant_message(completion, shown)
            done.append(assistant)
            sent.append(assistant.as_request())
            if not completion.tool_calls:
                return TurnResult(reply=assistant.content or "", messages=tuple(done))
            results = await self._run_tools(completion.tool_calls)
            for call, result in zip(completion.tool_calls, results, strict=True):
                tool_message = TurnMessage(
                    "tool", result, tool_call_id=call.id, tool_name=call.name
                )
                done.append(tool_message)
                sent.append(tool_message.as_request())
        on_text.next_step()
        await on_text(self._translate(STEP_LIMIT_NOTE))
        done.append(TurnMessage("assistant", STEP_LIMIT_NOTE))
        return TurnResult(reply=STEP_LIMIT_NOTE, messages=tuple(done), truncated=True)

    async def _complete(
        self, messages: list[dict[str, Any]], schemas: list[dict[str, Any]], on_text: TextSink
    ) -> Completion:
        scrubber = StreamingContextScrubber()

        async def scrubbed(piece: str) -> None:
            safe = scrubber.feed(piece)
            if safe:
                await on_text(safe)

        try:
            return await self._model.stream_chat(messages, schemas, on_text=scrubbed)
        finally:  # a cut reply too: release held text (an open recall span is dropped)
            tail = scrubber.flush()
            if tail:
                await on_text(tail)

    async def _run_tools(self, calls: Sequence[ToolCallRequest]) -> list[str]:
        """Run one reply's calls: writes one at a time, in order; reads between them together."""
        results: list[str] = []
        reads: list[ToolCallRequest] = []
        for call in calls:
            tool = self._tools.get(call.name)
            if tool is None or not tool.writes:  # an unknown tool is an instant error
                reads.append(call)
                continue
            results += await self._run_together(reads)
            reads = []
            results.append(await self._run_tool(call.name, call.arguments))
        results += await self._run_together(reads)
        return results

    async def _run_together(self, calls: Sequence[ToolCallRequest]) -> list[str]:
        if len(calls) <= 1:
            return [await self._run_tool(c.name, c.arguments) for c in calls]
        return list(await asyncio.gather(*(self._run_tool(c.name, c.arguments) for c in calls)))

    async def _run_tool(self, name: str, raw_arguments: str) -> str:
        tool = self._tools.get(name)
        if tool is None:
            return json.dumps({"success": False, "error": f"unknown tool {name!r}"})
        try:
            arguments = decode_arguments(raw_arguments, ValueError)
        except ValueError as exc:
            return json.dumps({"success": False, "error": str(exc)})
        try:
            return await tool.handler(arguments)
        except Exception as exc:  # a tool's bug must not end the turn
            log.exception("tool %s failed", name)
            return json.dumps({"success": False, "error": f"tool {name} failed: {exc}"})


def _same(note: str) -> str:
    return note


class _Paragraphs:
    """The turn's text sink: the text of a model reply after a tool call starts a new
    paragraph after the text shown before it ("Let me note that." / "Done."), never run
    into it. Each step's own message keeps its own text (the break is only shown)."""

    def __init__(self, sink: TextSink) -> None:
        self._sink = sink
        self._tail = ""  # the end of what was shown so far
        self._shown_any = False  # any text that is not blank
        self._step_begins = False

    def next_step(self) -> None:
        """A new model reply begins: its first text is set apart from what was shown."""
        self._step_begins = True

    async def __call__(self, piece: str) -> None:
        if self._step_begins and self._shown_any:
            if not piece.strip():
                return  # whitespace between the steps: the break below stands for it
            piece = _break_after(self._tail) + piece.lstrip("\n")
        if piece.strip():
            self._step_begins = False
            self._shown_any = True
        self._tail = (self._tail + piece)[-2:]
        await self._sink(piece)


def _break_after(shown: str) -> str:
    """What makes a blank line after text ending in `shown` (its last characters)."""
    if shown.endswith("\n\n"):
        return ""
    return "\n" if shown.endswith("\n") else "\n\n"


class _Shown:
    """The text sink of one model call, keeping what the person was shown of the model's
    text (a note is shown translated, and kept in English)."""

    def __init__(self, sink: TextSink, translate: Translate = _same) -> None:
        self._sink = sink
        self._translate = translate
        self._pieces: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self._pieces)

    async def __call__(self, piece: str) -> None:
        self._pieces.append(piece)
        await self._sink(piece)

    async def add_note(self, note: str) -> str:
        """Show `note` after what was shown (on its own line, in the person's language);
        return the whole as stored (the note in English)."""
        before = "\n" if self._pieces else ""
        await self._sink(before + self._translate(note))
        return self.text + before + note


async def _failed(done: list[TurnMessage], shown: _Shown, error: ModelError) -> TurnResult:
    """End the turn on a failed model call; text already shown is kept, with a note."""
    if not shown.text.strip():
        return TurnResult(reply="", messages=tuple(done), error=error)
    content = await shown.add_note(CUT_NOTE)
    done.append(TurnMessage("assistant", content))
    return TurnResult(reply=content, messages=tuple(done), truncated=True, error=error)


async def _assistant_message(completion: Completion, shown: _Shown) -> TurnMessage:
    """The model's message as the person saw it, with a note where the reply fell short."""
    # The model's echo of a recall block is never shown, so never stored either.
    content = scrub_context(completion.text) or None
    note = None
    if completion.finish_reason == "content_filter":
        note = FILTERED_NOTE
    elif completion.tool_calls:
        pass  # text or not, the turn goes on with the tools
    elif completion.finish_reason == "length":
        note = LENGTH_NOTE
    elif not (content or "").strip():
        note = EMPTY_NOTE
    if note is not None:
        log.warning("model reply noted: %s (finish_reason %s)", note, completion.finish_reason)
        content = await shown.add_note(note)
    return TurnMessage("assistant", content, tool_calls=completion.tool_calls)

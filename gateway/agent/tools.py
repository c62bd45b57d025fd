"""The tools one turn offers the model, bound to the person it serves.

A `Tool` is an OpenAI function schema plus an async handler that returns the
JSON text the model reads. `build_tools` makes the list for one inbound
message: the memory tool and the skills tools, both bound to that person's key
(so they can never write anyone else's file, nor show one person's skills to
another), and `session_search` over their earlier conversations,
bound to their recall scope. Built per turn, so the skills tools' per-turn
write limits hold. `TurnStaging` keeps each turn's memory approval, so that what
the turn staged for the person's approval is announced once its reply is delivered.
memory_core's tools are synchronous and touch files, so their handlers run in
a worker thread. `provider_tools` offers the external memory provider's tools,
routed through the session's `MemoryManager`.

A tool says whether it `writes`: the turn runs the read-only calls of one
model reply concurrently, the writing ones one at a time in order. Provider
tools count as writes unless their schema carries the MCP-style annotation
``"annotations": {"readOnlyHint": true}`` (stripped before the model sees it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from secrets import token_hex
from typing import Any

from gateway.agent.session_search import SESSION_SEARCH_SCHEMA, SessionSearch
from memory_core import (
    MEMORY_TOOL_SCHEMA,
    Approval,
    MemoryBackend,
    MemoryManager,
    MemoryTool,
    Origin,
    PendingChanges,
    ProviderError,
    SkillsStore,
    SkillsTools,
    StagedChange,
)

ToolHandler = Callable[[Mapping[str, Any]], Awaitable[str]]

READ_ONLY_SKILL_TOOLS = frozenset({"skills_list", "skill_view"})


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its OpenAI schema and an async handler returning JSON."""

    schema: dict[str, Any]
    handler: ToolHandler
    writes: bool = True  # False: safe to run beside other read-only calls

    @property
    def name(self) -> str:
        return str(self.schema["function"]["name"])


def build_tools(
    memory: MemoryBackend,
    skills: SkillsStore,
    *,
    user_key: str,
    is_admin: bool,
    session_search: SessionSearch | None = None,
    session_id: int | None = None,
    approve_all: bool = False,
    approval: Approval | None = None,
) -> list[Tool]:
    """The memory tool, `session_search` (when given) and the skills tools, in that order.
    The memory tool's changes are recorded as the person's own, made in `session_id`; an
    entry that reads as an instruction waits for the person's approval, and with
    `approve_all` (``memory.write_approval: all``) every change does. `approval`: the
    turn's own (from `TurnStaging`, which announces what it staged); None: a fresh one."""
    origin = Origin("person", session_id)
    if approval is None:
        approval = turn_approval(memory, approve_all)
    memory_tool = MemoryTool(
        memory, user_key=user_key, is_admin=is_admin, origin=origin, approval=approval
    )
    tools = [Tool(MEMORY_TOOL_SCHEMA, in_thread(memory_tool.handle))]
    if session_search is not None:  # bound to this person's recall scope by the caller
        tools.append(Tool(SESSION_SEARCH_SCHEMA, session_search.handle, writes=False))
    return tools + skill_tools(SkillsTools(skills, role="primary", user_key=user_key))


def turn_approval(memory: MemoryBackend, approve_all: bool) -> Approval:
    """How one turn's memory tool stages: a batch of its own, everything with `approve_all`."""
    return Approval(PendingChanges(memory), everything=approve_all, batch=token_hex(8))


class TurnStaging:
    """The approvals of the person's own turns, kept per session and person until the
    reply is delivered; then `take` gives what they staged, to be announced once.

    A turn that ended without a reply (a fault, /stop) keeps what it staged for
    the next delivered reply of that session and person. Kept per person, so a
    group session never hands one person's staged changes to another.
    """

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], list[Approval]] = {}

    def approval(
        self, session_key: str, user_key: str, memory: MemoryBackend, approve_all: bool
    ) -> Approval:
        """A new turn's approval, kept until `take` (earlier ones that staged nothing go)."""
        approval = turn_approval(memory, approve_all)
        kept = [a for a in self._open.get((session_key, user_key), []) if a.staged]
        self._open[(session_key, user_key)] = [*kept, approval]
        return approval

    def take(self, session_key: str, user_key: str) -> tuple[StagedChange, ...]:
        """What the person's turns in the session staged and is still waiting (not decided,
        expired or erased meanwhile: a change is matched by its id and batch)."""
        approvals = self._open.pop((session_key, user_key), [])
        staged = [c for a in approvals for c in a.staged]
        if not staged:
            return ()
        waiting = {(c.id, c.batch) for c in approvals[0].pending.list(user_key)}
        return tuple(c for c in staged if (c.id, c.batch) in waiting)


def skill_tools(skills_tools: SkillsTools) -> list[Tool]:
    """`skills_list`, `skill_view` and `skill_manage` of one run, as tools."""
    tools = []
    for schema in skills_tools.schemas():
        handler = in_thread(_skill_handler(skills_tools, schema))
        reads = schema["function"]["name"] in READ_ONLY_SKILL_TOOLS
        tools.append(Tool(schema, handler, writes=not reads))
    return tools


def provider_tools(manager: MemoryManager) -> list[Tool]:
    """The memory providers' tools, each call routed through `manager`."""
    tools = []
    for schema in manager.tool_schemas():
        offered, read_only = _function_schema(schema)
        tools.append(Tool(offered, _provider_handler(manager, offered), writes=not read_only))
    return tools


def _function_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The schema in the API's ``{"type": "function", ...}`` shape, and its read-only hint."""
    inner = dict(schema.get("function", schema))
    hints = [schema.get("annotations"), inner.pop("annotations", None)]
    read_only = any(isinstance(h, Mapping) and h.get("readOnlyHint") is True for h in hints)
    return {"type": "function", "function": inner}, read_only


def _provider_handler(manager: MemoryManager, schema: Mapping[str, Any]) -> ToolHandler:
    name = str(schema["function"]["name"])

    async def handler(arguments: Mapping[str, Any]) -> str:
        try:
            return await manager.handle_tool_call(name, arguments)
        except ProviderError as exc:  # the provider failed or timed out: a tool error
            return json.dumps({"success": False, "error": str(exc)})

    return handler


def _skill_handler(
    skills_tools: SkillsTools, schema: Mapping[str, Any]
) -> Callable[[Mapping[str, Any]], str]:
    name = str(schema["function"]["name"])

    def handle(arguments: Mapping[str, Any]) -> str:
        return skills_tools.handle(name, arguments)

    return handle


def in_thread(fn: Callable[[Mapping[str, Any]], str]) -> ToolHandler:
    """A synchronous tool (memory_core's touch files) as an async handler run in a thread."""

    async def handler(arguments: Mapping[str, Any]) -> str:
        return await asyncio.to_thread(fn, arguments)

    return handler

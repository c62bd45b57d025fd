"""The tools one turn offers the model, bound to the person it serves.

A `Tool` is an OpenAI function schema plus an async handler that returns the
JSON text the model reads. `build_tools` makes the list for one inbound
message: the memory tool and the skills tools, both bound to that person's key
(so they can never write anyone else's file, nor show one person's skills to
another), and `session_search` over their earlier conversations (`recall`),
bound to their recall scope. Built per turn, so the skills tools' per-turn
write limits hold.
memory_core's tools are synchronous and touch files, so their handlers run in
a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.agent.recall import SESSION_SEARCH_SCHEMA, SessionSearch
from memory_core import MEMORY_TOOL_SCHEMA, FileMemoryStore, MemoryTool, SkillsStore, SkillsTools

ToolHandler = Callable[[Mapping[str, Any]], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its OpenAI schema and an async handler returning JSON."""

    schema: dict[str, Any]
    handler: ToolHandler

    @property
    def name(self) -> str:
        return str(self.schema["function"]["name"])


def build_tools(
    memory: FileMemoryStore,
    skills: SkillsStore,
    *,
    user_key: str,
    is_admin: bool,
    session_search: SessionSearch | None = None,
) -> list[Tool]:
    """The memory tool, `session_search` (when given) and the skills tools, in that order."""
    memory_tool = MemoryTool(memory, user_key=user_key, is_admin=is_admin)
    tools = [Tool(MEMORY_TOOL_SCHEMA, _in_thread(memory_tool.handle))]
    if session_search is not None:  # bound to this person's recall scope by the caller
        tools.append(Tool(SESSION_SEARCH_SCHEMA, session_search.handle))
    skills_tools = SkillsTools(skills, role="primary", user_key=user_key)
    for schema in skills_tools.schemas():
        tools.append(Tool(schema, _in_thread(_skill_handler(skills_tools, schema))))
    return tools


def _skill_handler(
    skills_tools: SkillsTools, schema: Mapping[str, Any]
) -> Callable[[Mapping[str, Any]], str]:
    name = str(schema["function"]["name"])

    def handle(arguments: Mapping[str, Any]) -> str:
        return skills_tools.handle(name, arguments)

    return handle


def _in_thread(fn: Callable[[Mapping[str, Any]], str]) -> ToolHandler:
    async def handler(arguments: Mapping[str, Any]) -> str:
        return await asyncio.to_thread(fn, arguments)

    return handler

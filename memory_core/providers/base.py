"""The memory provider interface (DESIGN.md §4).

A provider adds recall beyond the built-in layers. One provider instance
serves one session: the manager creates it, calls `initialize` with the
session's `SessionContext`, and then drives the other methods. Every method
but `erase_user` has a harmless default, so a provider implements only what it
offers; `erase_user` it must implement (it erases a person's data).

Providers run inside the bot's event loop: their methods must not block it
(do blocking work with ``asyncio.to_thread``). The manager times out and logs
a provider that is slow or fails; it never lets one break a turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from memory_core.errors import ProviderError
from memory_core.scopes import CHAT_TYPES, ChatType

AgentKind = Literal["primary", "background"]


@dataclass(frozen=True)
class SessionContext:
    """Who and where a session is; handed to every provider at `initialize`.

    `platform` is the person's platform (telegram, discord, console), the one
    in their user key; the stored session's `source` is that platform too, or
    review / extraction for a background agent's session. `chat_type` takes
    the values the session store takes (`CHAT_TYPES`); `recall_scope` turns
    user, chat, chat type and thread into what recall may see. `agent_kind` is
    ``"background"`` for the review and extraction agents: providers give them
    recall, but they never cause provider writes.
    """

    session_id: int
    user_key: str
    platform: str
    chat_id: str
    chat_type: ChatType
    parent_session_id: int | None = None
    agent_kind: AgentKind = "primary"
    thread_id: str | None = None  # the session's thread or forum topic: recall stays inside it

    def __post_init__(self) -> None:
        if self.chat_type not in CHAT_TYPES:
            raise ProviderError(f"chat type {self.chat_type!r} is not private or group")

    @property
    def is_background(self) -> bool:
        return self.agent_kind == "background"

    @property
    def is_group(self) -> bool:
        return self.chat_type != "private"


@dataclass(frozen=True)
class TranscriptMessage:
    """One message of a finished session, as given to `on_session_end`."""

    role: str
    content: str
    timestamp: float | None = None


class MemoryProvider:
    """Base class of every memory provider; subclasses set `name`.

    `tool_schemas` returns OpenAI-style function schemas, either
    ``{"type": "function", "function": {"name": …}}`` or the bare
    ``{"name": …, "description": …, "parameters": …}``; `handle_tool_call`
    answers a call of one of them with a string (JSON by convention).
    """

    name: ClassVar[str] = ""

    async def initialize(self, session: SessionContext) -> None:
        """Bind to a session; called once, before anything else."""

    async def system_prompt_block(self) -> str:
        """Static text for the session's frozen system prompt ("" for none)."""
        return ""

    async def prefetch(self, query: str) -> str:
        """Recall for the coming turn, given the user's message ("" for none)."""
        return ""

    async def sync_turn(self, user_text: str, assistant_text: str) -> None:
        """Learn from a finished turn; runs after the reply, off the reply path."""

    async def queue_prefetch(self, query: str) -> None:
        """Warm up recall for the next turn; runs after the reply."""

    async def on_session_end(self, messages: Sequence[TranscriptMessage]) -> None:
        """The session ended (a real boundary: /new, rotation, shutdown)."""

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools this provider offers the model (static, cheap to call)."""
        return []

    async def handle_tool_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one of this provider's tools; the default knows none."""
        raise ProviderError(f"provider {self.name!r} has no tool {name!r}")

    async def shutdown(self) -> None:
        """Release resources; called once when the session's manager shuts down."""

    async def erase_user(self, user_key: str) -> None:
        """Erase everything this provider holds about `user_key` (``/forget all``).

        Called on an instance that was never initialized (erasure is about a
        person, not a session). Every provider must say how it erases: one that
        keeps nothing of its own overrides this with a method that does nothing;
        the default refuses, so a provider's data is never silently kept.
        """
        raise ProviderError(
            f"memory provider {self.name!r} does not implement erase_user: "
            "its data about a person cannot be erased"
        )


def schema_tool_name(schema: object) -> str | None:
    """The function name in an OpenAI-style tool schema, either shape (None if it has none)."""
    if not isinstance(schema, Mapping):
        return None
    inner = schema.get("function", schema)
    name = inner.get("name") if isinstance(inner, Mapping) else None
    return name if isinstance(name, str) and name else None

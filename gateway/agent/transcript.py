"""Stored messages as the requests that first carried them.

A session's history is replayed to the model exactly as it was sent (same
keys, same order), so a resumed session, the background review and the next
turn all share the request prefix a provider may have cached.
"""

from __future__ import annotations

import json
import time
from typing import Any

from gateway.agent.turn import TurnMessage
from memory_core import NewMessage, StoredMessage


def as_sent(m: StoredMessage) -> dict[str, Any]:
    """A stored message as the request that first carried it had it (same keys, same order).

    The store keeps text as ``''`` where the request had ``null``: the turn
    never sends an empty assistant text (an empty reply gets a note, and a
    tool-call reply without text goes as ``null``), so ``''`` there was ``null``.
    """
    content: str | None = m.content
    if m.role == "assistant" and not content:
        content = None
    item: dict[str, Any] = {"role": m.role, "content": content}
    if m.tool_calls:
        item["tool_calls"] = json.loads(m.tool_calls)
    if m.tool_call_id is not None:
        item["tool_call_id"] = m.tool_call_id
    if m.role == "tool" and m.tool_name is not None:
        item["name"] = m.tool_name
    return item


def as_stored(message: TurnMessage, key: str) -> NewMessage:
    """A turn's message as the store keeps it; `key` makes a retried write idempotent."""
    calls = [call.as_message() for call in message.tool_calls]
    return NewMessage(
        role=message.role,
        content=message.content or "",
        timestamp=time.time(),
        key=key,
        tool_name=message.tool_name,
        tool_calls=json.dumps(calls, ensure_ascii=False) if calls else None,
        tool_call_id=message.tool_call_id,
    )

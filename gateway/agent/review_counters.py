"""How one turn moves its session's counters for the background review.

The review runs when a session has gone some turns without a memory write
(`memory.nudge_interval`) or some tool steps without a skill write
(`skills.creation_nudge_interval`). The counters live in state.db, next to
the session, so eviction from the bot's cache or a restart keeps them; this
module only reads a finished turn and says how to move them.

A memory write is a successful `memory` call (its actions, add, replace and
remove, all write); a skill write is a successful `skill_manage` call (every
action of it writes). A tool step is one model reply that asked for tools.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from gateway.agent.turn import TurnMessage
from memory_core import CounterUpdate

MEMORY_TOOL = "memory"
SKILL_WRITE_TOOL = "skill_manage"


def counter_update(messages: Sequence[TurnMessage]) -> CounterUpdate:
    """The counter change for one turn's messages (the user's message first)."""
    memory_written = skill_written = False
    steps = 0
    for message in messages:
        if message.role == "assistant" and message.tool_calls:
            steps += 1
        elif message.role == "tool" and _succeeded(message.content):
            if message.tool_name == MEMORY_TOOL:
                memory_written = True
            elif message.tool_name == SKILL_WRITE_TOOL:
                skill_written, steps = True, 0  # count only the steps after the last write
    return CounterUpdate(
        turns=0 if memory_written else 1,
        steps=steps,
        memory_written=memory_written,
        skill_written=skill_written,
    )


def _succeeded(result: str | None) -> bool:
    """True when a tool's JSON result says ``"success": true``."""
    try:
        payload = json.loads(result or "")
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("success") is True

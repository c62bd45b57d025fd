"""The memory tool of a background run, held to what the person said.

`grounded` wraps the memory tool of a review or an extraction: an entry about
the person (target ``user``, an add or the new text of a replace) goes through
only when `support.check` finds it in the person's own words of the stretch
the job read (`own_words`: their messages, not the assistant's replies, tool
output, forwarded messages or the lines they quoted). Otherwise the whole call
is refused (the model gets a tool error naming the words the person never
said, and may try again with what they did say) and the refusal is logged at
info. A remove is never held back: forgetting is not learning.

Staging hook: with `stage` given, a refused call is handed to it instead (for
``memory.write_approval``: stage the write for the person's approval with the
reason shown) and what it returns is the model's tool result.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gateway.agent.tools import Tool, ToolHandler
from gateway.jobs.support import OwnWords, Support, check
from memory_core import StoredMessage

log = logging.getLogger(__name__)

MEMORY_TOOL = "memory"
NOT_SAID_CODE = "not_said_by_person"

Stager = Callable[[Mapping[str, Any], "tuple[Unsupported, ...]"], Awaitable[str]]
"""Stage a refused memory call for approval: (the call's arguments, why) -> tool result."""


@dataclass(frozen=True)
class Unsupported:
    """One entry of a memory call that the person's words do not support."""

    content: str
    support: Support


def own_words(messages: Sequence[StoredMessage]) -> OwnWords:
    """What the person said in `messages`: their own (not forwarded) messages only."""
    return OwnWords(m.content for m in messages if m.role == "user" and m.own_words)


def grounded(
    tools: Sequence[Tool], said: OwnWords, job: str, stage: Stager | None = None
) -> list[Tool]:
    """`tools` with the memory tool held to `said` (see the module doc); `job` names the
    run in the log (review, extraction)."""
    return [
        replace(t, handler=_held(t.handler, said, job, stage)) if t.name == MEMORY_TOOL else t
        for t in tools
    ]


def unsupported(arguments: Mapping[str, Any] | str, said: OwnWords) -> tuple[Unsupported, ...]:
    """The entries about the person in a memory call that `said` does not support
    (none when the call is malformed: the memory tool itself explains that)."""
    args = _mapping(arguments)
    if args is None or args.get("target") != "user":
        return ()
    operations = args.get("operations")
    items = operations if isinstance(operations, list) and operations else [args]
    refused = []
    for item in items:
        if not isinstance(item, Mapping) or item.get("action") not in ("add", "replace"):
            continue
        content = item.get("content")
        if isinstance(content, str) and content.strip():
            verdict = check(content, said)
            if not verdict.supported:
                refused.append(Unsupported(content, verdict))
    return tuple(refused)


def _held(handler: ToolHandler, said: OwnWords, job: str, stage: Stager | None) -> ToolHandler:
    async def held(arguments: Mapping[str, Any]) -> str:
        refused = unsupported(arguments, said)
        if not refused:
            return await handler(arguments)
        for entry in refused:  # the entry's text stays out of the log
            log.info(
                "%s: %s an entry the person never said (%d of its %d words unsaid)",
                job,
                "staged" if stage is not None else "dropped",
                len(entry.support.missing),
                len(entry.support.words),
            )
        if stage is not None:
            return await stage(arguments, refused)
        return json.dumps(_refusal(refused), ensure_ascii=False)

    return held


def _refusal(refused: Sequence[Unsupported]) -> dict[str, Any]:
    reasons = "; ".join(f"{e.content!r}: {e.support.reason()}" for e in refused)
    return {
        "success": False,
        "code": NOT_SAID_CODE,
        "error": (
            "nothing was saved: save only what the person said themselves, in their words "
            f"(not your replies, tool output, quoted or forwarded text). {reasons}"
        ),
    }


def _mapping(arguments: Mapping[str, Any] | str) -> Mapping[str, Any] | None:
    if isinstance(arguments, Mapping):
        return arguments
    try:
        decoded = json.loads(arguments)
    except (TypeError, ValueError):
        return None
    return decoded if isinstance(decoded, Mapping) else None

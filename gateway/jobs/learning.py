"""The tools a background agent learns with, and the line that says what it learned.

Review and extraction agents get only the memory tool and the skills tools,
bound to the one person whose conversation they read: the memory tool without
admin rights (so only that person's USER.md, never the shared MEMORY.md nor
anyone else's profile) and the skills tools in the ``background`` role (no
operator's or shared skill can change; a skill is patched only after it was
read in the same run; nothing is deleted). Both record what they changed,
which `summary_line` turns into the one short line a chat sees afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from gateway.agent.tools import Tool, in_thread, skill_tools
from gateway.delivery import literal
from gateway.i18n import N_
from memory_core import (
    MEMORY_TOOL_SCHEMA,
    Approval,
    MemoryBackend,
    MemoryChange,
    MemoryTool,
    Origin,
    SkillChange,
    SkillsStore,
    SkillsTools,
    StagedChange,
)

Notifications = Literal["off", "on", "verbose"]
_SIGNS = {"add": "➕", "replace": "✏️", "remove": "➖"}
MEMORY_UPDATED = N_("Memory updated")
SKILL_CHANGED = N_("skill '{name}' changed")
_SKILL_PAST = {
    "create": N_("skill '{name}' created"),
    "patch": N_("skill '{name}' patched"),
    "edit": N_("skill '{name}' rewritten"),
    "write_file": N_("skill '{name}' extended"),
}


class Translates(Protocol):
    """A person's language (`PersonLocale`, `Translator`): `_` gives a message in it."""

    def _(self, message: str, **values: Any) -> str: ...


class LearningTools:
    """The memory and skills tools of one background run for `user_key`."""

    def __init__(
        self,
        memory: MemoryBackend,
        skills: SkillsStore,
        user_key: str,
        origin: Origin,
        approval: Approval | None = None,
    ) -> None:
        """`origin`: the job and session the memory changes are recorded as learned in;
        `approval`: which writes wait for the person's approval (see `Approval`)."""
        self.approval = approval
        self._memory = MemoryTool(
            memory, user_key, is_admin=False, origin=origin, approval=approval
        )
        self._skills = SkillsTools(skills, role="background", user_key=user_key)
        self._writing: set[asyncio.Future[str]] = set()

    @property
    def tools(self) -> list[Tool]:
        memory = Tool(MEMORY_TOOL_SCHEMA, self.memory_handler)
        return [memory, *skill_tools(self._skills)]

    async def memory_handler(self, arguments: Mapping[str, Any]) -> str:
        """The memory tool, run in a thread that a cancelled run waits for (`settled`)."""
        write = asyncio.ensure_future(in_thread(self._memory.handle)(arguments))
        self._writing.add(write)
        write.add_done_callback(self._writing.discard)
        return await asyncio.shield(write)  # a cancelled run does not hide a finished write

    async def settled(self, timeout: float = 10.0) -> None:
        """Wait for memory writes still in flight (a run cancelled mid-call), so what is
        reported afterwards is what is on disk or staged."""
        if self._writing:
            await asyncio.wait(set(self._writing), timeout=timeout)

    @property
    def staged(self) -> tuple[StagedChange, ...]:
        """The changes this run staged for the person's approval, in order."""
        return () if self.approval is None else tuple(self.approval.staged)

    @property
    def memory_changes(self) -> tuple[MemoryChange, ...]:
        return self._memory.changes

    @property
    def skill_changes(self) -> tuple[SkillChange, ...]:
        return self._skills.changes

    @property
    def changed(self) -> bool:
        return bool(self.memory_changes or self.skill_changes)


def summary_line(
    memory: Sequence[MemoryChange],
    skills: Sequence[SkillChange],
    mode: Notifications,
    locale: Translates,
) -> str | None:
    """The chat's line after a review, in `locale`'s language: None when `mode` is off or
    nothing changed.

    ``on``: "💾 Memory updated · skill 'deploy-checks' patched"; ``verbose``
    adds one line per memory change (➕ added, ✏️ replaced, ➖ removed), with the whole
    entry as stored (`gateway.delivery.literal`: no Markdown of its own shows).
    """
    if mode == "off" or not (memory or skills):
        return None
    parts = [locale._(MEMORY_UPDATED)] if memory else []
    named: dict[str, str] = {}
    for change in skills:  # one mention per skill, its first change
        named.setdefault(change.name, _SKILL_PAST.get(change.action, SKILL_CHANGED))
    parts += [locale._(past, name=name) for name, past in named.items()]
    line = "💾 " + " · ".join(parts)
    if mode != "verbose":
        return line
    details = [f"{_SIGNS.get(c.action, '•')} {_preview(c)}" for c in memory]
    return "\n".join([line, *details])


def _preview(change: MemoryChange) -> str:
    """The entry a change wrote, whole (for a removal, the text that named the entry)."""
    text = change.content if change.content is not None else (change.old_text or "")
    return literal(text.strip())

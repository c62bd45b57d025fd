"""A turn's tools: what the person may use in this turn, grounded in their words.

`ToolBox.for_turn` gives one person's set for one session: the memory and
skills tools as they may use them, `session_search` within their recall scope
(leaving out this session), and the session's providers' tools. The memory
tool writes about the person only what their words in this session ground
(`gateway.jobs.grounding`); with write approval on, what is not grounded is
staged for their approval instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from gateway.agent.recall import Recapper
from gateway.agent.session_search import SessionSearch
from gateway.agent.tools import Tool, TurnStaging, build_tools, provider_tools, turn_approval
from gateway.jobs.approvals import stager
from gateway.jobs.grounding import (
    MEMORY_TOOL,
    Grounding,
    RefusalRecorder,
    SaidWords,
    grounded,
    own_words,
)
from gateway.messages import MessageIdentity
from gateway.open_sessions import OpenSession
from gateway.person_locale import PersonLocale
from memory_core import MemoryBackend, OwnWords, SessionBackend, SkillsStore


@dataclass(frozen=True)
class ToolBox:
    """What a turn's tools are made from; `for_turn` gives one person's set."""

    memory: MemoryBackend
    skills: SkillsStore
    sessions: SessionBackend
    recapper: Recapper  # the auxiliary model, for session_search recaps
    recap_timeout: float
    is_admin: Callable[[str, str], bool]  # (platform, user id): `AccessPolicy.is_admin`
    approve_all: bool = False  # memory.write_approval: all: every memory change waits
    staging: TurnStaging | None = None  # keeps what a turn staged for the notice after it
    stage_ungrounded: bool = False  # write_approval background|all: stage, not drop
    on_refused: RefusalRecorder | None = None  # counts entries dropped as not grounded

    def for_turn(
        self, who: MessageIdentity, session: OpenSession, locale: PersonLocale | None = None
    ) -> list[Tool]:
        """The memory and skills tools as `who` may use them, session_search within their
        recall scope (leaving out this session), and the session's providers' tools. The
        memory tool writes about the person only what their words in this session ground
        (`gateway.jobs.grounding`)."""
        if self.staging is not None:
            approval = self.staging.approval(
                who.session_key, who.user_key, self.memory, self.approve_all
            )
        else:
            approval = turn_approval(self.memory, self.approve_all)
        tools = build_tools(
            self.memory,
            self.skills,
            user_key=who.user_key,
            is_admin=self.is_admin(who.platform, who.user_id),
            session_search=SessionSearch(
                store=self.sessions,
                recapper=self.recapper,
                scope=who.scope,
                current_session_id=session.session_id,
                timeout=self.recap_timeout,
                now=locale.now if locale is not None else None,  # "yesterday" is theirs
            ),
            session_id=session.session_id,
            approve_all=self.approve_all,
            approval=approval,
        )
        memory = next(t.handler for t in tools if t.name == MEMORY_TOOL)
        grounding = Grounding(
            self._said(who, session.session_id),
            "turn",
            stager(memory, approval) if self.stage_ungrounded else None,
            entries=lambda: asyncio.to_thread(self.memory.origins, "user", who.user_key),
            on_refused=self.on_refused,
        )
        return grounded(tools, grounding) + provider_tools(session.manager)

    def _said(self, who: MessageIdentity, session_id: int) -> SaidWords:
        """The person's own words in this session, read when a write first needs them."""

        async def said() -> OwnWords:
            stored = await self.sessions.get_messages(session_id, who.scope, lineage=False)
            return own_words(stored)

        return said

"""A turn's second step: everything the model is sent besides the person's message.

`Preparation.prepare` continues the session's history exactly as it was sent
(so the request prefix stays the same: the history held since the last turn,
grown by this turn's message, or read from the store), opens the session
(its frozen prompt and providers), offers the person's tools, moves into a
compressed child session near the context budget, tells a sink that keeps
link previews which links the person sent, and asks the providers what they
recall for this message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.agent.compression import Compressor, clip_text, fixed_chars
from gateway.agent.sent_history import SentHistory, stored_form
from gateway.agent.toolbox import ToolBox
from gateway.agent.tools import Tool
from gateway.agent.turn_input import Asked
from gateway.delivery import LinkSink
from gateway.media import without_image_lines
from gateway.messages import MessageIdentity, ReplySink
from gateway.open_sessions import OpenSession, OpenSessions
from gateway.person_locale import PersonLocale
from memory_core import SessionBackend, TranscriptMessage


@dataclass
class Prepared:
    """What a turn sends the model: its session (prompt, providers), the history before
    this turn's message, the tools, and what the providers recalled."""

    session: OpenSession
    history: SentHistory
    tools: list[Tool]
    earlier: list[dict[str, Any]]
    recalled: str


class Preparation:
    """Prepares each turn's request from the session, its history and the providers."""

    def __init__(
        self,
        store: SessionBackend,
        sessions: OpenSessions,
        tools: ToolBox,
        compressor: Compressor,
    ) -> None:
        self._store = store
        self._sessions = sessions
        self._tools = tools
        self._compressor = compressor

    async def prepare(
        self,
        who: MessageIdentity,
        asked: Asked,
        held: SentHistory | None,
        sink: ReplySink,
        locale: PersonLocale | None,
    ) -> Prepared | None:
        """The turn's request, `held` (the session's history as last sent, if the cache had
        it) grown by `asked`; None when `asked` was answered already (delivered again)."""
        history = await self._sent_history(held, asked, who)
        if history is None:
            return None
        session = await self._sessions.open(who, asked.session_id)
        tools = self._tools.for_turn(who, session, locale)
        session, history, tools = await self._compress(who, asked, session, history, tools, locale)
        earlier, _ = history.earlier()
        _trust_person_links(sink, history, asked.message.text)
        recalled = await session.manager.prefetch_all(asked.message.text)
        return Prepared(session, history, tools, earlier, recalled)

    async def _sent_history(
        self, held: SentHistory | None, asked: Asked, who: MessageIdentity
    ) -> SentHistory | None:
        """The session's history with this turn's message last: `held` grown by it when it
        is new and follows on, else read from the store (None: it was answered already)."""
        first = asked.first
        if (
            held is not None
            and held.session_id == first.session_id
            and first.inserted == 1
            and held.extend([stored_form(asked.new, asked.message_id, first.session_id)])
        ):
            return held
        return await self._history(first.session_id, who, asked.message_id)

    async def _history(
        self, session_id: int, who: MessageIdentity, user_message_id: int
    ) -> SentHistory | None:
        """The session's messages read from the store, rebuilt exactly as
        `TurnMessage.as_request` sent them (this turn's last); None when this turn's
        message is not the last (it was answered already)."""
        stored = await self._store.get_messages(session_id, who.scope, lineage=False)
        if not stored or stored[-1].id != user_message_id:
            return None
        return SentHistory.of(session_id, stored, self._compressor.budget.message_cap)

    async def _compress(
        self,
        who: MessageIdentity,
        asked: Asked,
        session: OpenSession,
        history: SentHistory,
        tools: list[Tool],
        locale: PersonLocale | None,
    ) -> tuple[OpenSession, SentHistory, list[Tool]]:
        """Near the context budget, move into a compressed child session with a fresh
        system prompt (see `agent.compression`); long messages are cut in `history`."""
        user_text = clip_text(asked.message.text, self._compressor.budget.message_cap)
        schemas = [tool.schema for tool in tools]
        fixed = fixed_chars(session.system_prompt, user_text, schemas)
        size = fixed + history.earlier()[1]
        if not self._compressor.due(size):
            return session, history, tools
        child_id = await self._compressor.rotate(session.session_id, who.scope, fixed, size)
        if child_id is None:
            return session, history, tools
        parent = await self._store.get_messages(session.session_id, who.scope, lineage=False)
        ended = [TranscriptMessage(m.role, m.content, m.timestamp) for m in parent]
        session.manager.end_session(ended)  # the parent ended: its providers get its transcript
        self._sessions.ended(session.session_id, who.user_key)
        child = await self._sessions.open(who, child_id)  # drops the parent, stops its providers
        copied = await self._store.get_messages(child_id, who.scope, lineage=False)
        if copied:  # the summary and copies of the parent's tail, which its extraction covers
            await self._store.mark_extracted(child_id, copied[-1].id, finished=False)
        cap = self._compressor.budget.message_cap
        return (
            child,
            SentHistory.of(child_id, copied, cap),
            self._tools.for_turn(who, child, locale),
        )


def _trust_person_links(sink: ReplySink, history: SentHistory, text: str) -> None:
    """Tell a sink that keeps link previews which links the person sent in this session:
    those of their messages in the history and this one (not of a compression summary,
    which the model wrote). Any other link in the reply shows no preview (item 6). The
    history keeps their messages that hold a link (`SentHistory.linked_earlier`): a turn
    does not read every message of the session for them."""
    if not isinstance(sink, LinkSink):
        return
    sink.trust_links([*history.linked_earlier(), without_image_lines(text)])

"""One turn of a session: from the person's message to the stored reply.

`Turns.run` first reads a message's media (`gateway.media`: a voice note's
transcript, a picture's description; a `MediaError` is one line to the person
and nothing is stored), then writes the person's message before the model is
asked (so nothing is lost on an error), continues the session's history exactly as it was sent
(so the request prefix stays the same), offers the person's tools, moves into
a compressed child session near the context budget, adds what the providers
recall, runs the agent with the reply streaming to the sink, and stores what
the turn produced with the review counters it moved. A model fault becomes one
short line, kept on the person's message so that it counts as answered (a
restart does not answer it again; no request carries the line); a request
too long for the model ends its session. Lone surrogates in the person's text
(which UTF-8 cannot hold) become U+FFFD before anything sees it, so what the
model is sent is what the store keeps. A picture goes to the model as an image
part in its own turn only: the message is stored as its text (with the
picture's "[image: …]" line), and that is what every later turn sends, so the
history's bytes stay as they were. The caller holds the session's lock.

`Turns.answer` wraps it for the router: a message that waited in the session
queue leaves it once stored, and `/stop` may cancel the turn, whose shown text
is then kept, marked as stopped.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from gateway.agent.compression import Compressor, clip_text, fixed_chars
from gateway.agent.model_client import ModelClient
from gateway.agent.recall import Recapper
from gateway.agent.review_counters import counter_update
from gateway.agent.sent_history import SentHistory, stored_form
from gateway.agent.session_search import SessionSearch
from gateway.agent.tools import Tool, TurnStaging, build_tools, provider_tools, turn_approval
from gateway.agent.transcript import as_stored
from gateway.agent.turn import MESSAGE_TOO_LONG_NOTE, TOO_LONG_NOTE, Agent, fault_notice
from gateway.delivery import LinkSink
from gateway.errors import MediaError, ModelError, RequestTooLargeError
from gateway.i18n import N_
from gateway.jobs.approvals import stager
from gateway.jobs.grounding import (
    MEMORY_TOOL,
    Grounding,
    RefusalRecorder,
    SaidWords,
    grounded,
    own_words,
)
from gateway.media import ReadMedia, without_image_lines
from gateway.messages import InboundMessage, MessageIdentity, ReplySink, stored_text
from gateway.open_sessions import OpenSession, OpenSessions
from gateway.person_locale import PersonLocale
from gateway.session_queue import SessionQueue
from memory_core import (
    AppendResult,
    MemoryBackend,
    NewMessage,
    OwnWords,
    SessionBackend,
    SessionOrigin,
    SkillsStore,
    TranscriptMessage,
)

log = logging.getLogger(__name__)

# After what was shown of a reply the person stopped: shown in their language, stored in
# English (the model reads it in the next turns; see `agent.turn`).
STOPPED_NOTE = N_("(stopped)")
# A message with media when no reader was given (the router's line for what it cannot read).
NO_MEDIA_LINE = N_("I can only read text for now.")

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class MediaReading(Protocol):
    """What reads a message's media for its turn (`gateway.media.MediaReader`)."""

    async def read(self, message: InboundMessage) -> ReadMedia: ...


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


class Turns:
    """Runs the turns of every session, one at a time per session (the caller's lock)."""

    def __init__(
        self,
        model: ModelClient,
        store: SessionBackend,
        sessions: OpenSessions,
        tools: ToolBox,
        compressor: Compressor,
        max_tool_steps: int,
        queue: SessionQueue,
        on_turn: Callable[[str, str, float], None] | None = None,
        *,
        media: MediaReading | None = None,
    ) -> None:
        """`queue`: where messages wait for a busy session; a queued one leaves it once its
        turn stored it. `on_turn` is told of each turn that ended: its platform, outcome
        ("replied", "no_reply", "stopped") and seconds. `media` reads a message's voice
        notes and pictures (None: such a message gets one line, nothing is stored)."""
        self._on_turn = on_turn
        self._media = media
        self._model = model
        self._store = store
        self._sessions = sessions
        self._tools = tools
        self._compressor = compressor
        self._max_steps = max_tool_steps
        self._queue = queue

    async def answer(
        self,
        who: MessageIdentity,
        message: InboundMessage,
        sink: ReplySink,
        stored: Callable[[], None],
        queued: int | None = None,
        locale: PersonLocale | None = None,
    ) -> int | None:
        """The message's turn (`run`), which `/stop` may cancel (`OpenSessions.stop`): what
        was shown of the reply then stays, in the chat and in the session, marked as
        stopped. `queued`: the message's id in the session queue, if it waited there;
        `locale`: the sender's, for the lines the turn writes itself (None: English)."""
        shown = _Shown(sink)
        began = time.monotonic()
        task = asyncio.ensure_future(self._from_queue(who, message, shown, stored, queued, locale))
        with self._sessions.running(who.session_key, who.user_key, task) as running:
            try:
                result = await task
                self._ended(who.platform, "no_reply" if result is None else "replied", began)
                return result
            except asyncio.CancelledError:
                if running.erased:
                    return None  # the person's data is being erased: keep nothing
                if running.lost:  # another replica answers it now: nothing more here
                    log.warning("session %s: its lock was lost mid-turn", who.session_key)
                    return None
                if not running.stopped:
                    raise  # the service is stopping, not the person
        note = STOPPED_NOTE if locale is None else locale._(STOPPED_NOTE)
        await sink.write(("\n\n" if shown.text.strip() else "") + note)
        await self.stopped(who, shown.text)
        self._ended(who.platform, "stopped", began)
        return None

    def _ended(self, platform: str, outcome: str, began: float) -> None:
        if self._on_turn is not None:
            self._on_turn(platform, outcome, time.monotonic() - began)

    async def _from_queue(
        self,
        who: MessageIdentity,
        message: InboundMessage,
        sink: ReplySink,
        stored: Callable[[], None],
        queued: int | None,
        locale: PersonLocale | None,
    ) -> int | None:
        """`run`; a queued message leaves the queue once its session holds it (a restart in
        between finds it in both: the session's copy wins, stored once)."""
        if queued is None:
            return await self.run(who, message, sink, stored, locale)
        dropped: list[asyncio.Future[None]] = []

        def in_session() -> None:  # stored in its session: out of the queue at once
            dropped.append(asyncio.ensure_future(self._queue.drop(queued)))

        try:
            return await self.run(who, message, sink, in_session, locale)
        finally:
            await asyncio.gather(*dropped)

    async def run(
        self,
        who: MessageIdentity,
        message: InboundMessage,
        sink: ReplySink,
        stored: Callable[[], None],
        locale: PersonLocale | None = None,
    ) -> int | None:
        """One turn; returns the session's id when the reply completed (None on a fault,
        or when the message was answered before: a platform delivered it again).
        `stored` is called once the person's message is in state.db; `locale`: the
        sender's, for the notes the person is shown (None: English). A message with media
        is read first (`MediaReading`): it is stored as the text read, and its pictures go
        to the model in this turn only; a `MediaError` is its one line, `stored` is
        called (nothing of it needs keeping) and None returned."""
        images: tuple[str, ...] = ()
        if message.media:
            read = await self._read_media(message, sink, locale)
            if read is None:
                stored()  # the person has their line: the platform need not send it again
                return None
            message, images = replace(message, text=read.text), read.images
        message = _encodable(replace(message, text=stored_text(message)))  # a forward, marked
        key = who.session_key
        origin = self._origin(who)
        turn_id = uuid.uuid4().hex
        held = self._sessions.take_history(key)  # back in the cache once this turn's writes are
        asked = NewMessage(
            role="user",
            content=message.text,
            timestamp=time.time(),
            platform_message_id=message.message_id,
            key=f"{turn_id}:0",
            speaker_name=message.user_name,
            own_words=message.own_words,
        )
        first = await self._store.append_messages(origin=origin, messages=[asked])
        stored()
        history = await self._sent_history(held, asked, first, who)
        if history is None:
            log.info("message %s in session %s was answered already", message.message_id, key)
            return None
        session = await self._sessions.open(who, first.session_id)
        tools = self._tools.for_turn(who, session, locale)
        session, history, tools = await self._compress(
            who, message, session, history, tools, locale
        )
        earlier, _ = history.earlier()
        _trust_person_links(sink, history, message.text)
        recalled = await session.manager.prefetch_all(message.text)
        translate = None if locale is None else locale._
        agent = Agent(self._model, tools, max_steps=self._max_steps, translate=translate)
        result = await agent.run_turn(
            session.system_prompt,
            earlier,
            clip_text(message.text, self._compressor.budget.message_cap),  # stored whole
            recalled,
            sink.write,
            images=images,  # this turn only: the history keeps the text
        )
        self._sessions.replied(key)  # shown whole: a lost lock no longer stops it
        steps = [  # the user's message (index 0) is stored already
            as_stored(m, f"{turn_id}:{i}") for i, m in enumerate(result.messages[1:], start=1)
        ]
        kept = True
        if steps:  # tool steps already taken are kept even when a later model call failed
            written = await self._store.append_messages(
                origin=origin, messages=steps, counters=counter_update(result.messages)
            )
            kept = history.add_written(steps, written)
        if kept and history.session_id == session.session_id:
            session.history = history  # it matches the store: the next turn starts from it
        if result.error is not None:
            grown = len(earlier) + len(result.messages) > 1
            fault = _Fault(result.error, told=result.truncated, grown=grown)
            await self._model_fault(key, fault, first.message_ids[0], sink, translate)
            return None
        session.manager.sync_all(message.text, result.reply)
        session.manager.queue_prefetch_all(message.text)
        return session.session_id

    async def _read_media(
        self, message: InboundMessage, sink: ReplySink, locale: PersonLocale | None
    ) -> ReadMedia | None:
        """What `message`'s media says (None: it could not be read, and the person was told
        why in one line)."""
        try:
            if self._media is None:
                raise MediaError(NO_MEDIA_LINE, "no media reader")
            return await self._media.read(message)
        except MediaError as exc:
            log.info("media of a message could not be read: %s: %s", type(exc).__name__, exc)
            english = exc.message_id.format(**exc.values) if exc.values else exc.message_id
            await sink.write(english if locale is None else exc.line(locale))
            return None

    async def _sent_history(
        self,
        held: SentHistory | None,
        asked: NewMessage,
        first: AppendResult,
        who: MessageIdentity,
    ) -> SentHistory | None:
        """The session's history with this turn's message last: `held` grown by it when it
        is new and follows on, else read from the store (None: it was answered already)."""
        user_id = first.message_ids[0]
        if (
            held is not None
            and held.session_id == first.session_id
            and first.inserted == 1
            and held.extend([stored_form(asked, user_id, first.session_id)])
        ):
            return held
        return await self._history(first.session_id, who, user_id)

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
        message: InboundMessage,
        session: OpenSession,
        history: SentHistory,
        tools: list[Tool],
        locale: PersonLocale | None = None,
    ) -> tuple[OpenSession, SentHistory, list[Tool]]:
        """Near the context budget, move into a compressed child session with a fresh
        system prompt (see `agent.compression`); long messages are cut in `history`."""
        user_text = clip_text(message.text, self._compressor.budget.message_cap)
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

    async def _model_fault(
        self,
        key: str,
        fault: _Fault,
        asked_id: int,
        sink: ReplySink,
        translate: Callable[[str], str] | None,
    ) -> None:
        """A model call of the turn failed: the detail to the log, one short line to the
        person (in their language), kept on their message (`asked_id`) as its answer (in
        English).

        A request too long for the model would fail again on every later turn, so
        its session ends (reason ``too_long``) and the next message starts afresh.
        A reply cut off after some text was shown is stored with its note: that is
        its answer already.
        """
        error = fault.error
        log.warning("model error in session %s: %s: %s", key, type(error).__name__, error)
        if isinstance(error, RequestTooLargeError):
            await self._sessions.end(key, "too_long")
            line = TOO_LONG_NOTE if fault.grown else MESSAGE_TOO_LONG_NOTE
        elif fault.told:
            return
        else:
            line = fault_notice(error)
        await sink.write(line if translate is None else translate(line))
        # Shown first, kept after: a stop in between answers it again (at least once).
        await self._store.record_notice(asked_id, line)

    async def stopped(self, who: MessageIdentity, shown: str) -> None:
        """Keep what the person was shown of a reply they stopped, marked as stopped, as the
        session's answer: the next turn's history holds it, and a restart does not answer
        their message again. (Tool steps of the stopped turn are not kept.)"""
        text = f"{shown.rstrip()}\n\n{STOPPED_NOTE}" if shown.strip() else STOPPED_NOTE
        stop = NewMessage(
            role="assistant", content=text, timestamp=time.time(), key=f"{uuid.uuid4().hex}:0"
        )
        await self._store.append_messages(origin=self._origin(who), messages=[stop])

    def _origin(self, who: MessageIdentity) -> SessionOrigin:
        return SessionOrigin(
            session_key=who.session_key,
            source=who.platform,
            user_key=who.user_key,
            chat_id=who.chat_id,
            chat_type=who.chat_type,
            thread_id=who.thread_id,
            model=self._model.model,
        )


@dataclass(frozen=True)
class _Fault:
    """How a turn's model call failed: `told` when the cut reply carries its note already,
    `grown` when more than the person's message was sent."""

    error: ModelError
    told: bool
    grown: bool


def _encodable(message: InboundMessage) -> InboundMessage:
    """`message` with each lone surrogate in its text and sender's name replaced by U+FFFD
    (the store does the same for any writer; here the model's request gets it too)."""
    text = _LONE_SURROGATE.sub("\ufffd", message.text)
    name = message.user_name
    if name is not None:
        name = _LONE_SURROGATE.sub("\ufffd", name)
    if text == message.text and name == message.user_name:
        return message
    return replace(message, text=text, user_name=name)


def _trust_person_links(sink: ReplySink, history: SentHistory, text: str) -> None:
    """Tell a sink that keeps link previews which links the person sent in this session:
    those of their messages in the history and this one (not of a compression summary,
    which the model wrote). Any other link in the reply shows no preview (item 6). The
    history keeps their messages that hold a link (`SentHistory.linked_earlier`): a turn
    does not read every message of the session for them."""
    if not isinstance(sink, LinkSink):
        return
    sink.trust_links([*history.linked_earlier(), without_image_lines(text)])


class _Shown:
    """A reply sink that remembers the text written to it (what the person was shown)."""

    def __init__(self, sink: ReplySink) -> None:
        self._sink = sink
        self._pieces: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self._pieces)

    async def write(self, piece: str) -> None:
        self._pieces.append(piece)
        await self._sink.write(piece)

    async def finish(self) -> None:
        await self._sink.finish()

    def trust_links(self, texts: Iterable[str]) -> None:
        if isinstance(self._sink, LinkSink):
            self._sink.trust_links(texts)

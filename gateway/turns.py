"""One turn of a session: from the person's message to the stored reply.

`Turns.run` is the turn, step by step (each in `gateway.agent`): read and
store the person's message before the model is asked, so nothing is lost on
an error (`turn_input`); prepare the request: the session's history exactly
as it was sent, the person's tools, a compressed child session near the
context budget, what the providers recall (`turn_prepare`); run the agent with
the reply streaming to the sink (`agent.turn`); store what the turn produced
with the review counters it moved, or answer its model fault with one short
line (`turn_result`). The caller holds the session's lock.

`Turns.answer` wraps it for the router: a message that waited in the session
queue leaves it once stored, and `/stop` may cancel the turn, whose shown text
is then kept, marked as stopped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from gateway.agent.compression import Compressor, clip_text
from gateway.agent.model_client import ModelClient
from gateway.agent.toolbox import ToolBox
from gateway.agent.turn import Agent, TurnResult
from gateway.agent.turn_input import Asked, Intake, MediaReading
from gateway.agent.turn_prepare import Preparation, Prepared
from gateway.agent.turn_result import STOPPED_NOTE, Outcome
from gateway.delivery import LinkSink
from gateway.messages import InboundMessage, MessageIdentity, ReplySink
from gateway.open_sessions import OpenSessions
from gateway.person_locale import PersonLocale
from gateway.session_queue import SessionQueue
from memory_core import SessionBackend

log = logging.getLogger(__name__)


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
        self._model = model
        self._sessions = sessions
        self._message_cap = compressor.budget.message_cap
        self._max_steps = max_tool_steps
        self._queue = queue
        self._intake = Intake(store, model.model, media)
        self._preparation = Preparation(store, sessions, tools, compressor)
        self._outcome = Outcome(store, sessions)

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
        await self._outcome.stopped(self._intake.origin(who), shown.text)
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
        read = await self._intake.read(message, sink, stored, locale)
        if read is None:
            return None
        held = self._sessions.take_history(who.session_key)  # back once this turn's writes are
        asked = await self._intake.write(who, read, stored)
        prepared = await self._preparation.prepare(who, asked, held, sink, locale)
        if prepared is None:
            key = who.session_key
            log.info("message %s in session %s was answered already", message.message_id, key)
            return None
        translate = None if locale is None else locale._
        result = await self._agent(asked, prepared, sink, translate)
        self._sessions.replied(who.session_key)  # shown whole: a lost lock no longer stops it
        if not await self._outcome.settle(
            who.session_key, asked, prepared, result, sink, translate
        ):
            return None  # a model fault: its line is the answer
        prepared.session.manager.sync_all(asked.message.text, result.reply)
        prepared.session.manager.queue_prefetch_all(asked.message.text)
        return prepared.session.session_id

    async def _agent(
        self,
        asked: Asked,
        prepared: Prepared,
        sink: ReplySink,
        translate: Callable[[str], str] | None,
    ) -> TurnResult:
        """The agent's turn, the reply streaming to `sink`."""
        agent = Agent(self._model, prepared.tools, max_steps=self._max_steps, translate=translate)
        return await agent.run_turn(
            prepared.session.system_prompt,
            prepared.earlier,
            clip_text(asked.message.text, self._message_cap),  # stored whole
            prepared.recalled,
            sink.write,
            images=asked.images,  # this turn only: the history keeps the text
        )


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

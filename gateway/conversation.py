"""Routing an inbound message: who may speak, a command or a turn, one at a time per session.

`Conversations.handle` takes an `InboundMessage`, reads its identity and its
sender's locale once (`Arrival`), asks the access policy first (a refusal
stores and asks nothing), and, holding its session's lock, runs a registered
command (never reaching the model or the transcript) or a turn of its session
(`gateway.answering`, `gateway.turns`). Errors become one short line, never a
crash. After a delivered reply the background work hears of it. The sessions
themselves (opening, ending, migration, eviction) belong to
`gateway.open_sessions.OpenSessions`.

No chat waits on another: the platform is told a message cannot be lost
(`on_stored`) before its session's lock is waited for, and not before it is
stored. A command or a refusal is done with at once; a message for a busy
session, or with media, is kept in the session queue first, and its turn, in
order, stores it. With replicas (`gateway.replicas`), every turn's message is
queued first and answered in order under the lock every replica shares, by the
loop this router owns (`gateway.session_order`), through the same `Answering`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator

from gateway.access import AccessPolicy
from gateway.answering import Answering, Arrival
from gateway.commands import parse_command
from gateway.commands.router import CommandRouter
from gateway.errors import NotStoredError
from gateway.guard import Once, Outage, guarded
from gateway.jobs import BackgroundWork
from gateway.messages import CommandSpec, InboundMessage, MessageEdit, ReplySink
from gateway.open_sessions import OpenSessions
from gateway.person_locale import PersonLocales
from gateway.replicas import Replicas
from gateway.session_order import SessionOrder
from gateway.session_queue import SessionQueue
from gateway.turns import Turns
from gateway.withdrawal import Withdrawal
from memory_core import PostgresUnavailableError, working

log = logging.getLogger(__name__)


class Conversations:
    """Routes inbound messages to a command or to their session's next turn."""

    def __init__(
        self,
        access: AccessPolicy,
        sessions: OpenSessions,
        turns: Turns,
        commands: CommandRouter,
        queue: SessionQueue,
        locales: PersonLocales,
        background: BackgroundWork | None = None,
        replicas: Replicas | None = None,
        withdrawal: Withdrawal | None = None,
    ) -> None:
        """`queue`: where a busy session's messages wait; `locales`: each sender's language
        and time zone; `background`: reviews and extractions (None: never learns on its
        own); `replicas`: what the sessions have waiting across replicas (None: one
        process); `withdrawal`: applies edits."""
        self.sessions = sessions
        self.locales = locales
        self._access, self._commands, self._queue = access, commands, queue
        self._background = background
        self._withdrawal = withdrawal
        self.outage = Outage()  # the store refusing turns' writes: one apology per session
        self._answering = Answering(
            sessions, turns, commands, queue, locales, self.outage, background
        )
        self.order = (
            None if replicas is None else SessionOrder(self._answering, sessions, queue, replicas)
        )  # replicas: each session's queue answered in order, on whichever holds it
        self._active, self._idle = 0, asyncio.Event()  # handle() and choose() calls running
        self._idle.set()

    @property
    def menu(self) -> list[CommandSpec]:
        """The commands everyone may use, for the platforms' command menus."""
        return self._commands.menu

    async def handle(
        self, message: InboundMessage, sink: ReplySink, on_stored: Callable[[], None] | None = None
    ) -> None:
        """Answer one message; errors become a short apology, never a crash.

        `on_stored` is called once the message can no longer be lost: when it is
        in state.db (a turn), or when nothing of it needs keeping (a command, a
        refusal), or at the latest when handling ends without an error. An adapter
        confirms the platform's update then, and only then: a store unavailable
        before that raises `NotStoredError` (the platform sends it again). The same
        message delivered again (same `message_id`) is stored once and answered
        once; one stored but never answered (the process stopped) is answered.
        """
        stored = Once(on_stored)
        with self._tracked(), working():  # an erasure from now on fences what this writes
            try:
                arrival = await self._answering.arrive(message)
                if await self._admitted(arrival, sink, stored):
                    await self._handle(arrival, sink, stored)
            except PostgresUnavailableError as exc:
                if stored.called:
                    raise
                raise NotStoredError(f"{message.platform} message not stored: {exc}") from exc
            stored()

    async def choose(self, message: InboundMessage, payload: str, sink: ReplySink) -> None:
        """Apply a picked choice (a pressed button): `message` says who picked it, and where.

        Adapters call this with the payload of a `Choice` they rendered as a button.
        A payload that is forged, used up, expired or offered to someone else is
        refused in one line and changes nothing.
        """
        with self._tracked(), working():
            arrival = await self._answering.arrive(message)
            if await self._admitted(arrival, sink, Once(None)):
                async with self.sessions.locked(arrival.who.session_key):
                    await self._commands.choose(arrival.who, message, payload, sink, arrival.locale)
                    await sink.finish()

    async def edited(self, edit: MessageEdit) -> None:
        """A person edited or deleted a message (see `gateway.withdrawal`)."""
        if self._withdrawal is not None:
            with self._tracked(), working():
                await self._withdrawal.edited(edit)

    async def chat_migrated(self, platform: str, old_chat_id: str, new_chat_id: str) -> None:
        """A group got a new id (Telegram: group to supergroup): its sessions move with it."""
        await self.sessions.migrate_chat(platform, old_chat_id, new_chat_id)

    async def drain(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the messages being handled; False if some are not done
        (their message is stored: answered after the restart)."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        await self.sessions.close()  # their providers stop; the sessions stay open in the store

    async def _admitted(self, arrival: Arrival, sink: ReplySink, stored: Once) -> bool:
        """The access decision, before anything else; a refusal stores and asks nothing (its
        update is confirmed before the refusal is sent: the next updates are fetched)."""
        message = arrival.message
        decision = await self._access.admit(message.platform, message.user_id, message.chat_type)
        if not decision.allowed:
            log.info("refused %s user %s", message.platform, message.user_id)
            stored()
            await self._access.refuse(decision, sink, arrival.locale)
        return decision.allowed

    async def _handle(self, arrival: Arrival, sink: ReplySink, stored: Once) -> None:
        message, key = arrival.message, arrival.who.session_key
        call = parse_command(message.text)
        if call is not None and not await self._commands.first_delivery(message):
            await sink.finish()  # delivered before: it ran where it arrived first
            return
        if self._background is not None:
            self._background.message_arrived(key)
        turn = call is None and arrival.speaks
        queued: int | None = None
        if not turn:
            stored()  # nothing of it is kept (a command never is): nothing to lose
        elif message.message_id is not None and (
            self.order is not None or message.media or self.sessions.busy(key)
        ):  # media: read before it is stored
            queued = await self._queue.keep(arrival.who, message, stored)
        if call is not None and not self._commands.needs_session(call):
            route = self._commands.route(arrival.who, message, call, sink, arrival.locale)
            await guarded(key, sink, arrival.locale, route)  # now, even mid-reply
            await sink.finish()
            return
        if queued is not None and self.order is not None:  # in order, on whichever replica
            await self.order.serve(arrival, queued, sink)
            return
        await self._answering.answer(arrival, call, sink, stored, queued)

    @contextlib.contextmanager
    def _tracked(self) -> Iterator[None]:
        self._active += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._active -= 1
            if self._active == 0:
                self._idle.set()

"""Routing an inbound message: who may speak, a command or a turn, one at a time per session.

`Conversations.handle` takes an `InboundMessage`, asks the access policy
first (a refusal stores and asks nothing), reads the message's identity once,
and, holding its session's lock, runs a registered command (never reaching the
model or the transcript) or a turn of its session (`gateway.turns`). Errors
become one short line, never a crash. After a delivered reply the background
work hears of it. The sessions themselves (opening, ending, migration,
eviction) belong to `gateway.session_cache.OpenSessions`.

No chat waits on another: the platform is told a message cannot be lost
(`on_stored`) before its session's lock is waited for, and not before it is
stored. A command or a refusal is done with at once; a message for a busy
session, or with media, is kept in the session queue first, and its turn, in
order, stores it. With replicas (`gateway.replicas`), every turn's message is
queued first and answered in order under the lock every replica shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator

from gateway.access import AccessPolicy
from gateway.commands import parse_command
from gateway.commands.registry import CommandCall
from gateway.commands.router import ERASED_LINE, CommandRouter
from gateway.errors import NotStoredError
from gateway.guard import Once, Outage, guarded
from gateway.i18n import N_
from gateway.jobs import BackgroundWork
from gateway.messages import CommandSpec, InboundMessage, MessageEdit, MessageIdentity, ReplySink
from gateway.person_locale import PersonLocale, PersonLocales
from gateway.replicas import SessionOrder
from gateway.session_cache import OpenSessions
from gateway.session_queue import SessionQueue
from gateway.turns import Turns
from gateway.withdrawal import Withdrawal
from memory_core import PostgresUnavailableError, working

log = logging.getLogger(__name__)

UNSUPPORTED_LINE = N_("I can't read that kind of message; send me text, a voice note or a picture.")
EMPTY_LINE = N_("Yes? Ask me something.")


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
        order: SessionOrder | None = None,
        withdrawal: Withdrawal | None = None,
    ) -> None:
        """`queue`: where a busy session's messages wait; `locales`: each sender's language
        and time zone; `background`: reviews and extractions (None: never learns on its
        own); `order`: replicas' order (None: one process); `withdrawal`: applies edits."""
        self.sessions = sessions
        self.locales = locales
        self._access, self._turns = access, turns
        self._commands, self._queue = commands, queue
        self._background = background
        self.order = order
        self._withdrawal = withdrawal
        if order is not None:
            order.attach(self._answer_queued, self._learn)
        self.outage = Outage()  # the store refusing turns' writes: one apology per session
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
                locale = await self.locales.arrived(message)
                if await self._admitted(message, sink, locale, stored):
                    await self._handle(MessageIdentity.of(message), message, sink, stored, locale)
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
            locale = await self.locales.arrived(message)
            if await self._admitted(message, sink, locale, Once(None)):
                who = MessageIdentity.of(message)
                async with self.sessions.locked(who.session_key):
                    await self._commands.choose(who, message, payload, sink, locale)
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

    async def _admitted(
        self, message: InboundMessage, sink: ReplySink, locale: PersonLocale, stored: Once
    ) -> bool:
        """The access decision, before anything else; a refusal stores and asks nothing (its
        update is confirmed before the refusal is sent: the next updates are fetched)."""
        decision = await self._access.admit(message.platform, message.user_id, message.chat_type)
        if not decision.allowed:
            log.info("refused %s user %s", message.platform, message.user_id)
            stored()
            await self._access.refuse(decision, sink, locale)
        return decision.allowed

    async def _handle(
        self,
        who: MessageIdentity,
        message: InboundMessage,
        sink: ReplySink,
        stored: Once,
        locale: PersonLocale,
    ) -> None:
        key, call = who.session_key, parse_command(message.text)
        if call is not None and not await self._commands.first_delivery(message):
            await sink.finish()  # delivered before: it ran where it arrived first
            return
        if self._background is not None:
            self._background.message_arrived(key)
        turn = call is None and _speaks(message)
        queued: int | None = None
        if not turn:
            stored()  # nothing of it is kept (a command never is): nothing to lose
        elif message.message_id is not None and (
            self.order is not None or message.media or self.sessions.busy(key)
        ):
            queued = await self._queue.keep(who, message, stored)  # media: read before it is stored
        if call is not None and not self._commands.needs_session(call):
            route = self._commands.route(who, message, call, sink, locale)  # now, even mid-reply
            await guarded(key, sink, locale, route)
            await sink.finish()
            return
        if queued is not None and self.order is not None:  # in order, on whichever replica
            await self.order.serve(key, message.platform, queued, sink)
            return
        async with self.sessions.locked(key):
            replied = await self._locked(who, message, call, sink, stored, queued, locale)
        self.sessions.trim()  # sessions kept past the bound while in use
        if replied is not None:
            await self._learn(key, replied, message)

    async def _locked(
        self,
        who: MessageIdentity,
        message: InboundMessage,
        call: CommandCall | None,
        sink: ReplySink,
        stored: Once,
        queued: int | None,
        locale: PersonLocale,
    ) -> int | None:
        """Under its session's lock: the turn or command; a completed reply's session id."""
        key = who.session_key
        replied: int | None = None
        if not _speaks(message):
            await sink.write(locale._(UNSUPPORTED_LINE if message.unsupported else EMPTY_LINE))
        elif call is None and self.sessions.erased(who.user_key):
            await sink.write(locale._(ERASED_LINE))  # sent before their erasure: part of it
            if queued is not None:
                await self._queue.drop(queued)
        elif call is None:
            answer = self._turns.answer(who, message, sink, stored, queued, locale)
            replied = await guarded(key, sink, locale, answer, stored, self.outage)
        else:
            await guarded(key, sink, locale, self._commands.route(who, message, call, sink, locale))
        await sink.finish()
        return replied

    async def _answer_queued(
        self, message: InboundMessage, sink: ReplySink, queued: int
    ) -> int | None:
        """A queued message's turn, its session's lock held (`SessionOrder`)."""
        locale = await self.locales.arrived(message)
        who, kept = MessageIdentity.of(message), Once.done()  # in the queue: stored
        replied = await self._locked(who, message, None, sink, kept, queued, locale)
        self.sessions.trim()
        return replied

    async def _learn(self, key: str, replied: int, message: InboundMessage) -> None:
        if self._background is not None:  # delivered: now learn
            await self._background.after_reply(key, replied, message)

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


def _speaks(message: InboundMessage) -> bool:
    """A turn's message: text, or voice notes and pictures (read in the turn)."""
    return bool(message.media) or (not message.unsupported and bool(message.text.strip()))

"""Answering one message under its session's lock: a turn, a command, or a line.

An `Arrival` is a message with its identity and the sender's locale, built
once when it arrives (`Answering.arrive`) and carried on every path: the
router's own, and a session's queue answered in order (`gateway.session_order`).
`Answering.answer` takes the session's lock and runs a turn of the session
(`gateway.turns`), a command that needs the session, or the one line for a
message with nothing to answer (or one that arrived before its sender's
erasure); a delivered reply's background work runs after the lock is let go.
`queued` answers a message of the session's queue for `gateway.session_order`,
which holds the lock itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.commands.registry import CommandCall
from gateway.commands.router import ERASED_LINE, CommandRouter
from gateway.guard import Once, Outage, guarded
from gateway.i18n import N_
from gateway.jobs import BackgroundWork
from gateway.messages import InboundMessage, MessageIdentity, ReplySink
from gateway.open_sessions import OpenSessions
from gateway.person_locale import PersonLocale, PersonLocales
from gateway.session_queue import SessionQueue
from gateway.turns import Turns

UNSUPPORTED_LINE = N_("I can't read that kind of message; send me text, a voice note or a picture.")
EMPTY_LINE = N_("Yes? Ask me something.")


@dataclass(frozen=True)
class Arrival:
    """A message as it arrived: its identity, its sender's locale, and whether it is a
    turn's (`speaks`), each read once."""

    message: InboundMessage
    who: MessageIdentity
    locale: PersonLocale
    speaks: bool


class Answering:
    """Answers one message at a time per session, the session's lock held by the caller."""

    def __init__(
        self,
        sessions: OpenSessions,
        turns: Turns,
        commands: CommandRouter,
        queue: SessionQueue,
        locales: PersonLocales,
        outage: Outage,
        background: BackgroundWork | None = None,
    ) -> None:
        self._sessions, self._turns, self._commands = sessions, turns, commands
        self._queue, self._locales, self._outage = queue, locales, outage
        self._background = background

    async def arrive(self, message: InboundMessage) -> Arrival:
        """`message` with its identity and its sender's locale (their settings read)."""
        who = MessageIdentity.of(message)
        return Arrival(message, who, await self._locales.arrived(message), speaks(message))

    async def answer(
        self,
        arrival: Arrival,
        call: CommandCall | None,
        sink: ReplySink,
        stored: Once,
        queued: int | None,
    ) -> None:
        """Hold the session's lock for the turn or command; then its background work."""
        key = arrival.who.session_key
        async with self._sessions.locked(key):
            replied = await self._under_lock(arrival, call, sink, stored, queued)
        self._sessions.trim()  # sessions kept past the bound while in use
        if replied is not None:
            await self.learn(key, replied, arrival.message)

    async def _under_lock(
        self,
        arrival: Arrival,
        call: CommandCall | None,
        sink: ReplySink,
        stored: Once,
        queued: int | None,
    ) -> int | None:
        """Under its session's lock: the turn or command; a completed reply's session id."""
        message, who, locale = arrival.message, arrival.who, arrival.locale
        replied: int | None = None
        if not arrival.speaks:
            await sink.write(locale._(UNSUPPORTED_LINE if message.unsupported else EMPTY_LINE))
        elif call is None and self._sessions.erased(who.user_key):
            await sink.write(locale._(ERASED_LINE))  # sent before their erasure: part of it
            if queued is not None:
                await self._queue.drop(queued)
        elif call is None:
            answer = self._turns.answer(who, message, sink, stored, queued, locale)
            replied = await guarded(who.session_key, sink, locale, answer, stored, self._outage)
        else:
            route = self._commands.route(who, message, call, sink, locale)
            await guarded(who.session_key, sink, locale, route)
        await sink.finish()
        return replied

    async def queued(self, arrival: Arrival, sink: ReplySink, queue_id: int) -> int | None:
        """A queued message's turn (it is stored: the platform was told), the lock held."""
        replied = await self._under_lock(arrival, None, sink, Once.done(), queue_id)
        self._sessions.trim()  # sessions kept past the bound while in use
        return replied

    async def learn(self, key: str, replied: int, message: InboundMessage) -> None:
        """A reply was delivered: the background work hears of it (outside the lock)."""
        if self._background is not None:
            await self._background.after_reply(key, replied, message)


def speaks(message: InboundMessage) -> bool:
    """A turn's message: text, or voice notes and pictures (read in the turn)."""
    return bool(message.media) or (not message.unsupported and bool(message.text.strip()))

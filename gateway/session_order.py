"""Several replicas on one PostgreSQL: each session's messages answered in order, once.

With shared session locks, every message that will be a turn is queued first
and the platform told; then `serve` takes the session's lock, held across every
replica, and answers first the session's messages a turn stored and never
answered (its replica died mid-turn: `Replicas.unanswered`), oldest first, then
its queued messages oldest first (`Replicas.queued_messages`), whichever replica
received them (a message another replica received gets its sink from the
adapter of its platform here, `reply_sink`), each dropped from the queue once
its turn stored it, until none is left. Having let go, it looks once more: a
message queued just before the release is answered then, unless another
replica took the lock meanwhile (it answers it). A replica that finds the lock
taken waits for it; its own message may be answered by the holder meanwhile,
and it then finds nothing left.

`sweep` takes over what a replica that died left (`Replicas.due`), for the
sessions whose lock nobody holds (the server released the dead replica's locks
with its connection). Their turns continue from the store: the stored system
prompt and history, byte for byte. So a killed turn's message is answered
before the follow-up another replica got, and once: its turn finds it stored
(a message found answered already is not answered again). A session's next
message never passes it: the holder tries it first, and while it stays
unanswered (its store refuses the reply) the messages after it wait in the
queue, in order.

`Conversations` builds this loop over its own `Answering`: every message is
answered by the same code as a message of one process, its identity and
locale read once (`Arrival`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gateway.answering import Answering, Arrival
from gateway.messages import InboundMessage, ReplySink
from gateway.open_sessions import OpenSessions
from gateway.replicas import STALE, UNANSWERED_WITHIN, Replicas
from gateway.session_queue import SessionQueue
from memory_core import working
from memory_core.sessions import LOST_WITHIN

log = logging.getLogger(__name__)

ANSWERED, BLOCKED, ELSEWHERE = "answered", "blocked", "elsewhere"  # `_answer_stored`

SinkFor = Callable[[InboundMessage], ReplySink]


@dataclass
class _Served:
    """What one hold of a session's lock answered."""

    replied: list[tuple[int, InboundMessage]] = field(default_factory=list)
    tried: set[int] = field(default_factory=set)  # queue ids whose turn ran here


class SessionOrder:
    """Answers each session's queued messages in order, on whichever replica holds it."""

    def __init__(
        self,
        answering: Answering,
        sessions: OpenSessions,
        queue: SessionQueue,
        replicas: Replicas,
    ) -> None:
        self._answering = answering
        self._sessions = sessions
        self._queue = queue
        self._replicas = replicas
        self._sinks: dict[str, SinkFor] = {}

    def serve_platform(self, platform: str, sink_for: SinkFor) -> None:
        """Replies to `platform`'s messages go through `sink_for` (an adapter's
        `reply_sink`); a platform not served here is left to a replica that serves it."""
        self._sinks[platform] = sink_for

    async def serve(self, own: Arrival, queue_id: int, sink: ReplySink) -> None:
        """Answer `own`'s session's queued messages in order under its lock, `own` (queued
        as `queue_id`) into `sink`; then look once more after letting go."""
        key, platform = own.who.session_key, own.message.platform
        served = _Served()
        mine: dict[int, tuple[Arrival, ReplySink | None]] = {queue_id: (own, sink)}
        async with self._sessions.locked(key):
            await self._drain(key, platform, mine, served)
        if await self._session_waiting(key, platform, served):
            async with self._sessions.try_locked(key) as got:
                if got:
                    await self._drain(key, platform, {}, served)
        if queue_id not in served.tried:  # another replica answered it: this reply is empty
            await sink.finish()
        await self._learned(key, served)

    async def sweep(self, stale: float = STALE, within: float = UNANSWERED_WITHIN) -> int:
        """Take over the sessions nobody holds whose messages waited longer than `stale`
        seconds or were stored and never answered (stored within `within` seconds); how
        many messages were answered."""
        answered = 0
        for platform in list(self._sinks):
            for key in await self._replicas.due(platform, stale, within):
                answered += await self._take_over(key, platform)
        return answered

    async def _take_over(self, key: str, platform: str) -> int:
        """Answer `key`'s stored and queued messages (`_drain`) if nobody holds its lock;
        how many were answered."""
        served = _Served()
        with working():  # an erasure from now on fences what this writes
            async with self._sessions.try_locked(key) as got:
                if not got:
                    return 0
                await self._drain(key, platform, {}, served)
            await self._learned(key, served)
        if served.tried:
            log.info("took session %s over: %d messages answered", key, len(served.tried))
        return len(served.tried)

    async def _drain(
        self,
        key: str,
        platform: str,
        mine: dict[int, tuple[Arrival, ReplySink | None]],
        served: _Served,
    ) -> None:
        """Under `key`'s lock: first the turns of its messages stored and never answered,
        then its queued messages' turns, oldest first, until none is left (one whose turn
        ran and could not store it stays for the next sweep). `mine`: the messages that
        arrived here, by queue id, as they arrived and with their sinks."""
        outcome = await self._answer_stored(key, platform, served)
        if outcome == ELSEWHERE:
            log.warning("no %s adapter here: session %s is left to another", platform, key)
        if outcome != ANSWERED:
            return
        while True:
            waiting = [
                w
                for w in await self._replicas.queued_messages(platform, key)
                if w.queue_id not in served.tried
            ]
            if not waiting:
                return
            for entry in waiting:
                if not self._replicas.held(key):  # lost: another replica answers the rest
                    log.warning("session %s: its lock was lost; left to another replica", key)
                    return
                replied = len(served.replied)
                if not await self._answer_one(
                    entry.message, entry.queue_id, mine.get(entry.queue_id), served
                ):
                    log.warning("no %s adapter here: session %s is left to another", platform, key)
                    return
                if len(served.replied) == replied and await self._replicas.still_unanswered(
                    platform, key
                ):
                    log.warning(
                        "session %s: a message is still unanswered; the next ones wait", key
                    )
                    return

    async def _answer_stored(self, key: str, platform: str, served: _Served) -> str:
        """Under `key`'s lock: the turns of its messages a turn stored and never answered (a
        replica died mid-turn, or its store refused the reply), oldest first, each queued
        again first (its turn finds it stored: not stored twice). `ANSWERED` when none is
        left; `BLOCKED` when one is still unanswered after its turn (the store refused it
        again: the messages after it wait, so they are answered in order); `ELSEWHERE`
        when this replica has no adapter of their platform."""
        found = await self._replicas.unanswered(platform, time.time() - UNANSWERED_WITHIN, key)
        if found:  # a replica whose lock was lost may still be running it: it stops by then
            await asyncio.sleep(LOST_WITHIN)
        for message, stored in found:
            if not self._replicas.held(key):
                return BLOCKED  # this replica's lock was lost meanwhile: another answers
            if self._sink(message) is None:
                return ELSEWHERE
            self._replicas.tried(stored.id)
            arrival = await self._answering.arrive(message)
            queue_id = await self._queue.put(arrival.who, message)
            await self._answer_one(message, queue_id, (arrival, None), served)
            if await self._replicas.still_unanswered(platform, key):
                log.warning("session %s: a message is still unanswered; the next ones wait", key)
                return BLOCKED
        return ANSWERED

    async def _answer_one(
        self,
        message: InboundMessage,
        queue_id: int,
        arrived: tuple[Arrival, ReplySink | None] | None,
        served: _Served,
    ) -> bool:
        """One queued message's turn, into its sink (`arrived`: as it arrived, if that was
        read already, and its sink, if it arrived here) or its platform's; False when this
        replica has no adapter of its platform (it stays queued)."""
        arrival, sink = arrived if arrived is not None else (None, None)
        sink = sink or self._sink(message)
        if sink is None:
            return False
        if arrival is None:  # another replica's message: read here, once
            arrival = await self._answering.arrive(message)
        served.tried.add(queue_id)
        replied = await self._answering.queued(arrival, sink, queue_id)
        if replied is not None:
            served.replied.append((replied, arrival.message))
        return True

    async def _learned(self, key: str, served: _Served) -> None:
        for replied, message in served.replied:
            await self._answering.learn(key, replied, message)
        served.replied.clear()

    async def _session_waiting(self, key: str, platform: str, served: _Served) -> bool:
        waiting = await self._replicas.queued_messages(platform, key)
        return any(w.queue_id not in served.tried for w in waiting)

    def _sink(self, message: InboundMessage) -> ReplySink | None:
        sink_for = self._sinks.get(message.platform)
        return None if sink_for is None else sink_for(message)

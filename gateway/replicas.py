"""Several replicas on one PostgreSQL: each session's messages answered in order, once.

With shared session locks (`SessionLocks.shared`), every message that will be a
turn is queued first (`SessionQueue`) and the platform told; then `serve` takes
the session's lock, held across every replica, and answers first the session's
messages a turn stored and never answered (its replica died mid-turn: the
store keeps them marked, `SessionBackend.unanswered`), oldest first, then its
queued messages oldest first, whichever replica received them (a message another
replica received gets its sink from the adapter of its platform here,
`reply_sink`), each dropped from the queue once its turn stored it, until none
is left. Having let go, it looks once more: a message queued just before the
release is answered then, unless another replica took the lock meanwhile (it
answers it). A replica that finds the lock taken waits for it; its own message
may be answered by the holder meanwhile, and it then finds nothing left.

`sweep` takes over what a replica that died left: the sessions with messages
queued longer than `stale` seconds, and those with a person's message stored but
never answered (the replica died mid-turn), whose lock nobody holds (the server
released the dead replica's locks with its connection). Their turns continue
from the store: the stored system prompt and history, byte for byte. So a
killed turn's message is answered before the follow-up another replica got,
and once: its turn finds it stored (a message found answered already is not
answered again), and one whose turn ran here without an answer is tried again
by the sweep only after `RETRY_AFTER` seconds. A session's next message never
passes it: the holder tries it first, and while it stays unanswered (its store
refuses the reply) the messages after it wait in the queue, in order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from gateway.messages import InboundMessage, MessageIdentity, ReplySink
from gateway.session_cache import OpenSessions
from gateway.session_queue import SessionQueue, Waiting
from memory_core import SessionBackend, SessionInfo, StoredMessage, split_user_key, working
from memory_core.sessions import LOST_WITHIN

log = logging.getLogger(__name__)

STALE = 5.0  # seconds a message may wait before another replica takes its session over
SWEEP_EVERY = 2.0  # seconds between two sweeps
UNANSWERED_WITHIN = 24 * 3600.0  # older unanswered messages are left alone
UNANSWERED_READ = 10_000  # unanswered messages read at once (an outage leaves many)
RETRY_AFTER = 10.0  # seconds before the sweep tries again a stored message whose turn ran here
ANSWERED, BLOCKED, ELSEWHERE = "answered", "blocked", "elsewhere"  # `_answer_stored`

SinkFor = Callable[[InboundMessage], ReplySink]
Answer = Callable[[InboundMessage, ReplySink, int], Awaitable[int | None]]
"""One queued message's turn under its session's lock: (message, sink, queue id) -> the
session id when the reply completed."""
Learn = Callable[[str, int, InboundMessage], Awaitable[None]]
"""After a delivered reply, outside the lock: (session key, session id, message)."""


@dataclass
class _Served:
    """What one hold of a session's lock answered."""

    replied: list[tuple[int, InboundMessage]] = field(default_factory=list)
    tried: set[int] = field(default_factory=set)  # queue ids whose turn ran here


class SessionOrder:
    """Answers each session's queued messages in order, on whichever replica holds it."""

    def __init__(self, sessions: OpenSessions, queue: SessionQueue, store: SessionBackend) -> None:
        self._sessions = sessions
        self._queue = queue
        self._store = store
        self._sinks: dict[str, SinkFor] = {}
        self._answer: Answer | None = None
        self._learn: Learn | None = None
        self._retried: dict[int, float] = {}  # stored message id -> when its turn ran here

    def attach(self, answer: Answer, learn: Learn) -> None:
        """How a queued message is answered and what hears of a delivered reply
        (`Conversations` attaches itself)."""
        self._answer, self._learn = answer, learn

    def serve_platform(self, platform: str, sink_for: SinkFor) -> None:
        """Replies to `platform`'s messages go through `sink_for` (an adapter's
        `reply_sink`); a platform not served here is left to a replica that serves it."""
        self._sinks[platform] = sink_for

    async def serve(self, key: str, platform: str, own: int, sink: ReplySink) -> None:
        """Answer `key`'s queued messages in order under its lock, `own` (this call's
        message, queue id) into `sink`; then look once more after letting go."""
        served = _Served()
        async with self._sessions.locked(key):
            await self._drain(key, platform, {own: sink}, served)
        if await self._session_waiting(key, platform, served):
            async with self._sessions.try_locked(key) as got:
                if got:
                    await self._drain(key, platform, {}, served)
        if own not in served.tried:  # another replica answered it: this reply is empty
            await sink.finish()
        await self._learned(key, served)

    async def sweep(self, stale: float = STALE, within: float = UNANSWERED_WITHIN) -> int:
        """Take over the sessions nobody holds whose messages waited longer than `stale`
        seconds or were stored and never answered (stored within `within` seconds); how
        many messages were answered."""
        answered = 0
        for platform in list(self._sinks):
            before = time.time() - stale
            oldest = time.time() - within
            keys = []
            for entry in await self._queue.waiting(platform):
                if entry.received_at < oldest:  # as at a restart: too old to answer now
                    await self._queue.drop(entry.queue_id)
                elif entry.received_at <= before:
                    keys.append(entry.message.session_key())
            stored_keys = [  # before what was queued after them
                message.session_key()
                for message, stored in await self._unanswered(platform, oldest)
                if stored.timestamp <= before and not self._tried_lately(stored.id)
            ]
            for key in dict.fromkeys(stored_keys + keys):  # oldest first
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
        self, key: str, platform: str, sinks: dict[int, ReplySink], served: _Served
    ) -> None:
        """Under `key`'s lock: first the turns of its messages stored and never answered,
        then its queued messages' turns, oldest first, until none is left (one whose turn
        ran and could not store it stays for the next sweep)."""
        outcome = await self._answer_stored(key, platform, served)
        if outcome == ELSEWHERE:
            log.warning("no %s adapter here: session %s is left to another", platform, key)
        if outcome != ANSWERED:
            return
        while True:
            waiting = [
                w for w in await self._of_session(key, platform) if w.queue_id not in served.tried
            ]
            if not waiting:
                return
            for entry in waiting:
                if not self._sessions.holds(key):  # lost: another replica answers the rest
                    log.warning("session %s: its lock was lost; left to another replica", key)
                    return
                replied = len(served.replied)
                if not await self._answer_one(
                    entry.message, entry.queue_id, sinks.get(entry.queue_id), served
                ):
                    log.warning("no %s adapter here: session %s is left to another", platform, key)
                    return
                if len(served.replied) == replied and await self._still_unanswered(key, platform):
                    log.warning(
                        "session %s: a message is still unanswered; the next ones wait", key
                    )
                    return

    async def _still_unanswered(self, key: str, platform: str) -> bool:
        """Whether `key` has a message a turn stored and did not answer (its store refused
        the reply): the ones after it wait for it, in order."""
        since = time.time() - UNANSWERED_WITHIN
        return bool(await self._unanswered(platform, since, key))

    async def _answer_stored(self, key: str, platform: str, served: _Served) -> str:
        """Under `key`'s lock: the turns of its messages a turn stored and never answered (a
        replica died mid-turn, or its store refused the reply), oldest first, each queued
        again first (its turn finds it stored: not stored twice). `ANSWERED` when none is
        left; `BLOCKED` when one is still unanswered after its turn (the store refused it
        again: the messages after it wait, so they are answered in order); `ELSEWHERE`
        when this replica has no adapter of their platform."""
        since = time.time() - UNANSWERED_WITHIN
        found = await self._unanswered(platform, since, key)
        if found:  # a replica whose lock was lost may still be running it: it stops by then
            await asyncio.sleep(LOST_WITHIN)
        for message, stored in found:
            if not self._sessions.holds(key):
                return BLOCKED  # this replica's lock was lost meanwhile: another answers
            if self._sink(message) is None:
                return ELSEWHERE
            now = time.monotonic()
            self._retried = {i: at for i, at in self._retried.items() if at > now - RETRY_AFTER}
            self._retried[stored.id] = now
            queue_id = await self._queue.put(MessageIdentity.of(message), message)
            await self._answer_one(message, queue_id, None, served)
            if await self._still_unanswered(key, platform):
                log.warning("session %s: a message is still unanswered; the next ones wait", key)
                return BLOCKED
        return ANSWERED

    def _tried_lately(self, stored_id: int) -> bool:
        """Whether the turn of stored message `stored_id` ran here in the last `RETRY_AFTER`
        seconds (and it is still unanswered: its turn found it answered before, or failed)."""
        at = self._retried.get(stored_id)
        return at is not None and at > time.monotonic() - RETRY_AFTER

    async def _unanswered(
        self, platform: str, since: float, key: str | None = None
    ) -> list[tuple[InboundMessage, StoredMessage]]:
        """`platform`'s messages (of session `key` only, if given: the store reads only
        its rows) stored since `since` and never answered, as the inbound messages they
        were (one that cannot be told apart from a new one is left out)."""
        found = []
        unanswered = await self._store.unanswered(platform, since, UNANSWERED_READ, key)
        for info, stored in unanswered:
            message = stored_inbound(platform, info, stored)
            if message is not None:
                found.append((message, stored))
        return found

    async def _answer_one(
        self, message: InboundMessage, queue_id: int, sink: ReplySink | None, served: _Served
    ) -> bool:
        """One queued message's turn, into `sink` or its platform's; False when this replica
        has no adapter of its platform (it stays queued)."""
        assert self._answer is not None, "SessionOrder.attach was not called"
        sink = sink or self._sink(message)
        if sink is None:
            return False
        served.tried.add(queue_id)
        replied = await self._answer(message, sink, queue_id)
        if replied is not None:
            served.replied.append((replied, message))
        return True

    async def _learned(self, key: str, served: _Served) -> None:
        if self._learn is not None:
            for replied, message in served.replied:
                await self._learn(key, replied, message)
        served.replied.clear()

    async def _session_waiting(self, key: str, platform: str, served: _Served) -> bool:
        return any(w.queue_id not in served.tried for w in await self._of_session(key, platform))

    async def _of_session(self, key: str, platform: str) -> list[Waiting]:
        """`key`'s queued messages of `platform` (read by the session's key: one indexed
        statement, whatever else the platform's queue holds)."""
        return [
            w
            for w in await self._queue.waiting_for(key)
            if w.message.platform == platform and w.message.session_key() == key
        ]

    def _sink(self, message: InboundMessage) -> ReplySink | None:
        sink_for = self._sinks.get(message.platform)
        return None if sink_for is None else sink_for(message)


def stored_inbound(
    platform: str, info: SessionInfo, stored: StoredMessage
) -> InboundMessage | None:
    """The inbound message a stored person's message was (None: it has no platform id, so
    it cannot be told apart from a new one, or its session is keyed differently now)."""
    if stored.platform_message_id is None:
        return None
    _, user_id = split_user_key(info.user_key)
    message = InboundMessage(
        platform=platform,
        chat_id=info.chat_id,
        chat_type=info.chat_type,
        user_id=user_id,
        text=stored.content,
        message_id=stored.platform_message_id,
        user_name=stored.speaker_name,
        thread_id=info.thread_id,
        own_words=stored.own_words,
    )
    return message if message.session_key() == info.session_key else None

"""Several replicas on one PostgreSQL: what a session has waiting, read across replicas.

With shared session locks (`SessionLocks.shared`, held through
`gateway.replica_locks`), every message that will be a turn is queued first
(`SessionQueue`) and the platform told; whichever replica holds the session's
lock then answers the session's messages in order (`gateway.session_order`).
This module tells whether this replica still holds a session's lock (`held`:
a lock is lost with its connection) and reads what there is to answer: a
session's queued messages
(`queued_messages`), whichever replica received them; the messages a turn
stored and never answered (its replica died mid-turn, or its store refused the
reply: `SessionBackend.unanswered`), as the inbound messages they were; and,
for the sweep that takes over what a dead replica left, the sessions whose
messages waited longer than `stale` seconds or were stored and never answered.
A stored message whose turn ran here is offered to the sweep again only after
`RETRY_AFTER` seconds (`tried`).
"""

from __future__ import annotations

import time

from gateway.messages import InboundMessage
from gateway.session_queue import SessionQueue, Waiting
from memory_core import SessionBackend, SessionInfo, SessionLocks, StoredMessage, split_user_key

STALE = 5.0  # seconds a message may wait before another replica takes its session over
SWEEP_EVERY = 2.0  # seconds between two sweeps
UNANSWERED_WITHIN = 24 * 3600.0  # older unanswered messages are left alone
UNANSWERED_READ = 10_000  # unanswered messages read at once (an outage leaves many)
RETRY_AFTER = 10.0  # seconds before the sweep tries again a stored message whose turn ran here


class Replicas:
    """Reads what the sessions have waiting, across replicas, over the session store."""

    def __init__(self, queue: SessionQueue, store: SessionBackend, locks: SessionLocks) -> None:
        """`locks`: the sessions' locks every replica shares (`SessionLocks.shared`)."""
        self._queue = queue
        self._store = store
        self._locks = locks
        self._retried: dict[int, float] = {}  # stored message id -> when its turn ran here

    def held(self, session_key: str) -> bool:
        """Whether this replica still holds `session_key`'s lock (it is lost with its
        connection: another replica may answer the session's messages now)."""
        return self._locks.held(session_key)

    async def queued_messages(self, source: str, session_key: str) -> list[Waiting]:
        """`session_key`'s queued messages of `source`, oldest first (read by the session's
        key: one indexed statement, whatever else the platform's queue holds)."""
        return [
            w
            for w in await self._queue.waiting_for(session_key)
            if w.message.platform == source and w.message.session_key() == session_key
        ]

    async def unanswered(
        self, source: str, since: float, session_key: str | None = None
    ) -> list[tuple[InboundMessage, StoredMessage]]:
        """`source`'s messages (of `session_key` only, if given: the store reads only its
        rows) stored since `since` and never answered, as the inbound messages they were
        (one that cannot be told apart from a new one is left out)."""
        found = []
        unanswered = await self._store.unanswered(source, since, UNANSWERED_READ, session_key)
        for info, stored in unanswered:
            message = stored_inbound(source, info, stored)
            if message is not None:
                found.append((message, stored))
        return found

    async def still_unanswered(self, source: str, session_key: str) -> bool:
        """Whether `session_key` has a message a turn stored and did not answer (its store
        refused the reply): the ones after it wait for it, in order."""
        since = time.time() - UNANSWERED_WITHIN
        return bool(await self.unanswered(source, since, session_key))

    async def due(self, source: str, stale: float, within: float) -> list[str]:
        """The sessions of `source` to take over, oldest first: those with a message stored
        and never answered, then those with a message queued, more than `stale` seconds
        ago (and within `within` seconds: older queued messages are dropped, as at a
        restart; a stored one whose turn ran here lately waits for `RETRY_AFTER`)."""
        before = time.time() - stale
        oldest = time.time() - within
        keys = []
        for entry in await self._queue.waiting(source):
            if entry.received_at < oldest:  # as at a restart: too old to answer now
                await self._queue.drop(entry.queue_id)
            elif entry.received_at <= before:
                keys.append(entry.message.session_key())
        stored_keys = [  # before what was queued after them
            message.session_key()
            for message, stored in await self.unanswered(source, oldest)
            if stored.timestamp <= before and not self._tried_lately(stored.id)
        ]
        return list(dict.fromkeys(stored_keys + keys))

    def tried(self, stored_id: int) -> None:
        """The turn of stored message `stored_id` runs here now."""
        now = time.monotonic()
        self._retried = {i: at for i, at in self._retried.items() if at > now - RETRY_AFTER}
        self._retried[stored_id] = now

    def _tried_lately(self, stored_id: int) -> bool:
        """Whether the turn of stored message `stored_id` ran here in the last `RETRY_AFTER`
        seconds (and it is still unanswered: its turn found it answered before, or failed)."""
        at = self._retried.get(stored_id)
        return at is not None and at > time.monotonic() - RETRY_AFTER


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

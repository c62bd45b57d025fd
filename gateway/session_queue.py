"""Messages waiting for a busy session, kept in state.db until their turn stores them.

A person's follow-up that arrives while their previous reply is still being
written cannot be stored in the session yet (it would land before that reply),
and it must not wait in memory either: the platform is told a message arrived
only once it cannot be lost, and a Telegram adapter fetches nothing new until
then. So it is queued here first (`SessionBackend.queue_message`), the platform
is told, and its turn, in arrival order, stores it in the session and drops it
from the queue. What is still queued at a stop is answered at the next start.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass

from gateway.messages import InboundMessage, MediaRef, MessageIdentity
from memory_core import SessionBackend, SessionStoreError
from memory_core.sessions import QueuedMessage

log = logging.getLogger(__name__)


def encode(message: InboundMessage) -> str:
    """The message as JSON text (every field; a lone surrogate survives as an escape)."""
    return json.dumps(asdict(message), ensure_ascii=True)


def decode(payload: str) -> InboundMessage:
    """A message `encode` wrote; `ValueError` (or `TypeError`) when it is not one."""
    fields = json.loads(payload)
    if not isinstance(fields, dict):
        raise ValueError("a queued message is not a JSON object")
    media = fields.pop("media", [])
    if not isinstance(media, list) or not all(isinstance(m, dict) for m in media):
        raise ValueError("a queued message's media is not a list of objects")
    return InboundMessage(**fields, media=tuple(MediaRef(**m) for m in media))


@dataclass(frozen=True)
class Waiting:
    """A queued message: its queue id, the message and when it was queued."""

    queue_id: int
    message: InboundMessage
    received_at: float


class SessionQueue:
    """The durable queue of messages waiting for their session, over the session store."""

    def __init__(self, store: SessionBackend) -> None:
        self._store = store

    async def put(self, who: MessageIdentity, message: InboundMessage) -> int:
        """Keep `message` until its turn; its queue id."""
        return await self._store.queue_message(
            who.session_key, who.user_key, who.platform, encode(message)
        )

    async def keep(
        self, who: MessageIdentity, message: InboundMessage, stored: Callable[[], None]
    ) -> int | None:
        """`put`, then tell the platform (`stored`); the queue id (None: the store refused,
        so the message's turn stores it and the platform waits for that, as before)."""
        try:
            queue_id = await self.put(who, message)
        except SessionStoreError as exc:
            log.warning("session %s: a message could not be queued: %s", who.session_key, exc)
            return None
        stored()
        return queue_id

    async def drop(self, queue_id: int) -> None:
        """The turn stored the message in its session: it waits no longer."""
        await self._store.drop_queued(queue_id)

    async def waiting(self, platform: str) -> list[Waiting]:
        """What of `platform` is still queued, oldest first (one that cannot be read is
        logged, dropped and skipped: it was written by this module, so it is damage)."""
        return await self._decoded(await self._store.queued_messages(platform))

    async def waiting_for(self, session_key: str) -> list[Waiting]:
        """What of the session `session_key` is still queued, oldest first (`waiting`
        narrowed to one session: the store reads only its rows)."""
        return await self._decoded(await self._store.queued_for(session_key))

    async def _decoded(self, entries: list[QueuedMessage]) -> list[Waiting]:
        found = []
        for entry in entries:
            try:
                found.append(Waiting(entry.id, decode(entry.payload), entry.received_at))
            except (ValueError, TypeError) as exc:
                log.error("queued message %d cannot be read (%s); dropped", entry.id, exc)
                await self._store.drop_queued(entry.id)
        return found

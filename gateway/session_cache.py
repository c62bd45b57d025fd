"""The sessions `Conversations` keeps in memory, and one lock per routing key.

At most `max_open` sessions stay cached; past that, the least recently used
ones that no turn is using are dropped (and their providers shut down). A
dropped session is not ended: it stays open in state.db, and its next
message resumes it from there, with the system prompt stored with it. A
session in use is never dropped, so the cache holds more than `max_open`
only while more than `max_open` turns run at once.

A cached session also keeps its history as requests carry it (`SentHistory`),
but only the most recently used sessions' histories up to `history_bytes` of
encoded JSON in all (about three times that in memory): a long session takes
up to a few hundred kilobytes, and a thousand of them would not fit. A session
whose history was dropped reads it from the store at its next turn, and keeps
it again.

A routing key's lock lives only while someone holds it or waits for it, so
the locks do not pile up with every key ever seen.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass

from gateway.agent.sent_history import SentHistory
from memory_core import MemoryManager

HISTORY_BYTES = 32 * 1024 * 1024  # encoded JSON of the histories kept, all sessions together


@dataclass
class OpenSession:
    """What stays fixed for one session: its id, frozen prompt and providers; and its
    history as requests carry it, while it is known to match the store (see `SentHistory`)."""

    session_id: int
    system_prompt: str
    manager: MemoryManager
    history: SentHistory | None = None


@dataclass
class _KeyLock:
    lock: asyncio.Lock
    users: int = 0  # holding or waiting


class SessionCache:
    """Cached sessions by routing key (least recently used first) and the keys' locks."""

    def __init__(self, max_open: int, history_bytes: int = HISTORY_BYTES) -> None:
        self.max_open = max(1, max_open)
        self.history_bytes = history_bytes
        self._sessions: OrderedDict[str, OpenSession] = OrderedDict()
        self._locks: dict[str, _KeyLock] = {}

    @property
    def open_count(self) -> int:
        """How many sessions are cached now."""
        return len(self._sessions)

    @property
    def lock_count(self) -> int:
        """How many routing keys have a lock now (held or waited for)."""
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def locked(self, key: str) -> AsyncIterator[None]:
        """Hold `key`'s lock: one turn or command at a time per routing key."""
        entry = self._locks.get(key)
        if entry is None:
            entry = self._locks[key] = _KeyLock(asyncio.Lock())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[key]

    def get(self, key: str) -> OpenSession | None:
        """The cached session of `key` (now the most recently used), or None."""
        session = self._sessions.get(key)
        if session is not None:
            self._sessions.move_to_end(key)
        return session

    def put(self, key: str, session: OpenSession) -> None:
        """Cache `session` as the most recently used; `trim` drops any excess."""
        self._sessions[key] = session
        self._sessions.move_to_end(key)

    def pop(self, key: str) -> OpenSession | None:
        """Take `key`'s session out of the cache (the caller shuts it down)."""
        return self._sessions.pop(key, None)

    def cached_keys(self) -> list[str]:
        """The routing keys of the cached sessions, least recently used first."""
        return list(self._sessions)

    def pop_all(self) -> list[OpenSession]:
        """Empty the cache, returning what it held (the caller shuts it down)."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        return sessions

    def trim(self) -> list[OpenSession]:
        """Drop the least recently used idle sessions past `max_open` and return them
        (the caller shuts their providers down); bound the histories kept."""
        self._bound_histories()
        excess = len(self._sessions) - self.max_open
        if excess <= 0:
            return []
        idle = [key for key in self._sessions if key not in self._locks][:excess]
        return [self._sessions.pop(key) for key in idle]

    def _bound_histories(self) -> None:
        """Keep the histories of the most recently used sessions within `history_bytes`;
        drop the others' (their next turn reads the store)."""
        kept = 0
        for session in reversed(self._sessions.values()):
            if session.history is None:
                continue
            kept += session.history.encoded_bytes
            if kept > self.history_bytes:
                session.history = None

"""The sessions' locks held across every replica, and what another replica made stale.

With shared `SessionLocks` (replicas on PostgreSQL) a routing key's lock is
held across every replica, and whoever takes it first compares the store's
`SessionMark` with the one this replica saw when it last let go: if another
replica wrote the session since, the cached history (or the whole session,
when its prompt changed) is dropped, so the turn continues from the store,
byte for byte what that replica sent. A `/stop` that finds no turn of its key
here asks the replica holding the key's lock (`stop_elsewhere`), which cancels
its turn as a local one is; a lock lost with its connection stops the turns
of its key here (`on_lost`). `OpenSessions` takes this as its `SharedLocks`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from gateway.open_sessions import SessionCache, held_mark
from memory_core import SessionBackend, SessionLocks

log = logging.getLogger(__name__)


class ReplicaLocks:
    """`SessionLocks` shared by the replicas, each hold checking the cached session."""

    def __init__(self, locks: SessionLocks, store: SessionBackend, cache: SessionCache) -> None:
        self._locks = locks
        self._store = store
        self._cache = cache

    def on_stop(self, stop: Callable[[str], None]) -> None:
        """Another replica's `/stop` found a key held here: `stop(key)`."""
        self._locks.on_stop(stop)

    def on_lost(self, lost: Callable[[list[str]], None]) -> None:
        """The locks of these keys were lost with their connection: `lost(keys)`."""
        self._locks.on_lost(lost)

    async def stop_elsewhere(self, key: str) -> bool:
        """Ask the replica holding `key` to stop its turn; whether one did."""
        return await self._locks.stop_elsewhere(key)

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold `key`'s lock across every replica, the cached session checked first."""
        async with self._locks.hold(key), self._fresh(key):
            yield

    @contextlib.asynccontextmanager
    async def try_hold(self, key: str) -> AsyncIterator[bool]:
        """Hold `key`'s lock for the block if no replica holds it now (True), else False."""
        async with self._locks.try_hold(key) as got:
            if not got:
                yield False
                return
            async with self._fresh(key):
                yield True

    @contextlib.asynccontextmanager
    async def _fresh(self, key: str) -> AsyncIterator[None]:
        """Under `key`'s shared lock: drop what another replica's writes made stale first;
        note the store's mark when the block ends (a block that failed drops the session).
        The mark at the end is the one this replica's own writes left when the session's
        history is held (`held_mark`): it is read from the store only when it is not. A
        mark noted wrong can only differ from the store's, never match a state another
        replica wrote (message ids are never used twice): the next holder then reads the
        store again, as after any other replica's write."""
        cached = self._cache.get(key)
        if cached is not None:
            mark = await self._store.session_mark(key)
            if mark is None or mark.session_id != cached.session_id or mark.prompt_chars is None:
                self._cache.retire(key)  # ended, moved on or its prompt cleared elsewhere
            elif cached.mark != mark:
                if mark.prompt_chars != len(cached.system_prompt):
                    self._cache.retire(key)
                else:
                    cached.history = None  # another replica wrote it: read the store
        ok = False
        try:
            yield
            ok = True
        finally:
            if not ok:
                self._cache.retire(key)
            elif (after := self._cache.get(key)) is not None:
                try:
                    after.mark = held_mark(after) or await self._store.session_mark(key)
                except Exception:  # unknown now: the next holder reads the store
                    log.warning("session %s: its mark could not be read", key, exc_info=True)
                    self._cache.retire(key)

"""One turn at a time per session: the lock a session's turn holds, by routing key.

`SessionLocks` is what the gateway asks of it: `hold(key)` waits for the key's
lock and holds it for the block; `try_hold(key)` takes it only if it is free at
once (the block gets True) or not at all (False), for the sweep that takes over
a dead replica's sessions. `shared` says whether the locks reach other
processes: `LocalSessionLocks` (here, asyncio locks, for SQLite's one process)
does not; `memory_core.pg.session_locks.PgSessionLocks` (PostgreSQL advisory
locks, released by the server when a replica's connection dies) does.

`/stop` reaches a turn wherever it runs: `stop_elsewhere(key)` asks the replica
whose turn holds `key`'s lock to cancel it (True: one holds it), and `on_stop`
registers what a replica does when asked (cancel its local turn of the key).
Locally there is nobody else to ask: `stop_elsewhere` is False, `on_stop` never fires.

A shared lock can be lost while it is held (its connection broke: the server
released it, and another replica may take the key). `on_lost(callback)` hears
the keys then, at once, so their turns stop before another replica may begin
them; `held(key)` says whether the lock taken for the block is still held, so
a holder answering several messages in a row stops at the first it no longer
holds. Local locks are never lost.

A key's local lock lives only while someone holds it or waits for it, so the
locks do not pile up with every key ever seen.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

LOST_WITHIN = 5.0
"""Seconds within which a replica notices that a shared lock it holds was lost, fails to
take it again and stops its turn. One who takes the key and finds a turn's message
unanswered waits this long before answering it (`memory_core.pg.session_locks`)."""


class SessionLocks(Protocol):
    """The per-session lock of turns, in this process or across every replica."""

    @property
    def shared(self) -> bool:
        """Whether another process holding a key's lock keeps this one out too."""
        ...

    def hold(self, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Wait for `key`'s lock, hold it for the block."""
        ...

    def try_hold(self, key: str) -> contextlib.AbstractAsyncContextManager[bool]:
        """Hold `key`'s lock for the block if it is free now (True), else nothing (False)."""
        ...

    async def stop_elsewhere(self, key: str) -> bool:
        """Ask the other replica running `key`'s turn to stop it; whether one holds the key."""
        ...

    def on_stop(self, callback: Callable[[str], None]) -> None:
        """`callback(key)` when another replica asks this one to stop `key`'s turn."""
        ...

    def on_lost(self, callback: Callable[[list[str]], None]) -> None:
        """`callback(keys)` when the locks of `keys`, held here, were lost."""
        ...

    def held(self, key: str) -> bool:
        """Whether `key`'s lock, taken by a block of this process, is still held."""
        ...


@dataclass
class _KeyLock:
    lock: asyncio.Lock
    users: int = 0  # holding or waiting


class KeyLocks:
    """asyncio locks by key, each kept only while held or waited for."""

    def __init__(self) -> None:
        self._locks: dict[str, _KeyLock] = {}

    def __len__(self) -> int:
        return len(self._locks)

    def __contains__(self, key: object) -> bool:
        return key in self._locks

    def locked(self, key: str) -> bool:
        """Whether `key`'s lock is held now."""
        entry = self._locks.get(key)
        return entry is not None and entry.lock.locked()

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
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


class LocalSessionLocks:
    """Session locks within this process (SQLite: one process per data directory)."""

    shared = False

    def __init__(self) -> None:
        self._keys = KeyLocks()

    def hold(self, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        return self._keys.hold(key)

    @contextlib.asynccontextmanager
    async def try_hold(self, key: str) -> AsyncIterator[bool]:
        if key in self._keys:
            yield False
            return
        async with self._keys.hold(key):
            yield True

    async def stop_elsewhere(self, key: str) -> bool:
        return False  # one process: no turn runs anywhere else

    def on_stop(self, callback: Callable[[str], None]) -> None:
        pass  # nobody else asks

    def on_lost(self, callback: Callable[[list[str]], None]) -> None:
        pass  # a lock of this process is never lost

    def held(self, key: str) -> bool:
        return key in self._keys


@dataclass(frozen=True)
class SessionMark:
    """What a routing key's open session looks like in the store, cheaply: a replica that
    finds it changed since it last held the key's lock knows another replica wrote it."""

    session_id: int
    last_message_id: int  # 0: no message yet
    prompt_chars: int | None  # the stored system prompt's length (None: none stored)

"""The open sessions: the owner of every session this process holds in memory.

`OpenSessions` starts or resumes a session with the prompt stored with it,
ends one (its providers hear the transcript, its extraction is scheduled),
ends a quiet one, moves a migrated group's sessions, drops a person's
sessions before their data is erased, and closes them all at shutdown;
`SessionCache` below it holds them, with one lock per routing key.

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
the locks do not pile up with every key ever seen. With replicas, the key's
lock is also held across every replica (`SharedLocks`: `gateway.replica_locks`,
which also drops what another replica's writes made stale), and a `/stop` that
finds no turn of its key here asks the replica holding it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.agent.prompt import build_system_prompt
from gateway.agent.sent_history import SentHistory
from gateway.messages import MessageIdentity
from memory_core import (
    KeyLocks,
    MemoryBackend,
    MemoryManager,
    SessionBackend,
    SessionContext,
    SessionInfo,
    SessionMark,
    SkillsStore,
    TranscriptMessage,
)

log = logging.getLogger(__name__)

HISTORY_BYTES = 32 * 1024 * 1024  # encoded JSON of the histories kept, all sessions together
ERASE_WAIT = 10.0  # seconds a cancelled turn of a person being erased may take to end

ManagerFactory = Callable[[], MemoryManager]
"""Builds one session's memory providers (a fresh `MemoryManager`, not yet initialised)."""


@dataclass
class OpenSession:
    """What stays fixed for one session: its id, frozen prompt and providers; and its
    history as requests carry it, while it is known to match the store (see `SentHistory`)."""

    session_id: int
    system_prompt: str
    manager: MemoryManager
    history: SentHistory | None = None
    mark: SessionMark | None = None  # the store's, when this replica last let go of the key
    stale: bool = False  # an edit changed what it holds: the key's next turn opens it anew


def held_mark(session: OpenSession) -> SessionMark | None:
    """`session`'s mark in the store as known here without reading it: when its history
    is held (it matches the store, every message of the session), its newest message
    id and its prompt's length; None when its history is not held."""
    history = session.history
    if history is None or history.session_id != session.session_id or history.max_id is None:
        return None
    return SessionMark(session.session_id, history.max_id, len(session.system_prompt))


class SessionCache:
    """Cached sessions by routing key (least recently used first) and the keys' locks."""

    def __init__(self, max_open: int, history_bytes: int = HISTORY_BYTES) -> None:
        self.max_open = max(1, max_open)
        self.history_bytes = history_bytes
        self._sessions: OrderedDict[str, OpenSession] = OrderedDict()
        self._locks = KeyLocks()
        self._retiring: set[asyncio.Task[None]] = set()  # dropped sessions shutting down

    @property
    def open_count(self) -> int:
        """How many sessions are cached now."""
        return len(self._sessions)

    @property
    def lock_count(self) -> int:
        """How many routing keys have a lock now (held or waited for)."""
        return len(self._locks)

    def busy(self, key: str) -> bool:
        """Whether a turn or command of `key` holds its lock or waits for it."""
        return key in self._locks

    def locked(self, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold `key`'s lock: one turn or command at a time per routing key."""
        return self._locks.hold(key)

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
        (their providers shut down in the background: no turn waits); bound the
        histories kept."""
        self._bound_histories()
        excess = len(self._sessions) - self.max_open
        idle = [key for key in self._sessions if key not in self._locks][: max(0, excess)]
        dropped = [self._sessions[key] for key in idle]
        for key in idle:
            self.retire(key)
        return dropped

    def retire(self, key: str) -> None:
        """Drop `key`'s cached session; its providers shut down in the background."""
        session = self._sessions.pop(key, None)
        if session is not None:
            task = asyncio.create_task(session.manager.shutdown())
            self._retiring.add(task)
            task.add_done_callback(self._retired)

    def _retired(self, task: asyncio.Task[None]) -> None:
        self._retiring.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("an evicted session's providers failed to shut down", exc_info=error)

    async def retired(self) -> None:
        """Wait for the dropped sessions' providers to shut down (failures are logged)."""
        await asyncio.gather(*self._retiring, return_exceptions=True)

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


@dataclass
class RunningTurn:
    """The turn a session is running now, which `/stop` may cancel."""

    task: asyncio.Future[Any]
    user_key: str
    stopped: bool = False  # cancelled by the person (not by the service stopping)
    erased: bool = False  # cancelled because the person's data is being erased: keep nothing
    lost: bool = False  # cancelled because its session's shared lock was lost: keep nothing
    replied: bool = False  # its reply is complete (only storing it is left)


class SessionEvents(Protocol):
    """What the background work hears of sessions (`gateway.jobs.BackgroundWork`)."""

    def session_ended(self, session_id: int, user_key: str) -> None: ...

    async def forget_person(self, user_key: str) -> None: ...


@dataclass(frozen=True)
class PromptMaker:
    """Builds a session's system prompt when it starts: memory snapshot, skills index and
    provider block as of now, with the operator's persona."""

    memory: MemoryBackend
    skills: SkillsStore
    profile_in_groups: bool = False  # `memory.profile_in_groups`
    persona: str | None = None  # the operator's persona text (`persona_file`)

    async def build(self, who: MessageIdentity, manager: MemoryManager) -> str:
        include_profile = who.chat_type == "private" or self.profile_in_groups
        snapshot = self.memory.snapshot(who.user_key, include_profile=include_profile)
        return build_system_prompt(
            snapshot=snapshot,
            skills_index=self.skills.index_block(who.user_key),
            provider_block=await manager.system_prompt_block(),
            platform=who.platform,
            persona=self.persona,
        )


class SharedLocks(Protocol):
    """The sessions' locks held across every replica (`gateway.replica_locks`): a holder
    finds the cached session checked against the store."""

    def hold(self, key: str) -> AbstractAsyncContextManager[None]: ...

    def try_hold(self, key: str) -> AbstractAsyncContextManager[bool]: ...

    async def stop_elsewhere(self, key: str) -> bool: ...

    def on_stop(self, stop: Callable[[str], None]) -> None: ...

    def on_lost(self, lost: Callable[[list[str]], None]) -> None: ...


class OpenSessions:
    """Opens, ends, moves and closes the sessions held in memory, by routing key.

    Sessions outlive the process: closing leaves them open in state.db, and a
    session that is not cached (after a restart, or dropped from the bounded
    cache) resumes from the store with its stored prompt.
    """

    def __init__(
        self,
        store: SessionBackend,
        new_manager: ManagerFactory,
        prompts: PromptMaker,
        cache: SessionCache,
        events: SessionEvents | None = None,
        shared: SharedLocks | None = None,
    ) -> None:
        """`cache`: where the sessions are held; `events`: the background work told of ends
        and erasures (None: nobody listens); `shared`: the sessions' locks held across
        every replica (None: one process)."""
        self._store = store
        self.shared = shared
        self._new_manager = new_manager
        self._prompts = prompts
        self._events = events
        self.cache = cache
        self._running: dict[str, RunningTurn] = {}  # routing key -> its turn now
        if shared is not None:  # another replica's /stop of a turn running here, lost locks
            shared.on_stop(self._asked_to_stop)
            shared.on_lost(self.lose)

    @contextlib.contextmanager
    def running(self, key: str, user_key: str, task: asyncio.Future[Any]) -> Iterator[RunningTurn]:
        """`task` is `key`'s turn (of `user_key`) for the block: `stop` may cancel it."""
        turn = self._running[key] = RunningTurn(task, user_key)
        try:
            yield turn
        finally:
            if self._running.get(key) is turn:
                del self._running[key]

    def erased(self, user_key: str) -> bool:
        """Whether `user_key`'s data was erased after the current work began (their
        message arrived before it): such work keeps nothing (`memory_core.fence`)."""
        return not self._store.fence.allows(user_key)

    async def stop(self, session_key: str) -> bool:
        """Cancel the turn `session_key` is running (`/stop`), here or, with shared locks,
        on the replica whose turn holds the key; whether there was one."""
        if self._stop_here(session_key):
            return True
        return self.shared is not None and await self.shared.stop_elsewhere(session_key)

    def _asked_to_stop(self, session_key: str) -> None:
        """Another replica's `/stop` found `session_key` held: its turn, if here, stops."""
        self._stop_here(session_key)

    def lose(self, keys: list[str]) -> None:
        """The shared locks of `keys` were lost (their connection broke): another replica
        may answer their messages now, so their turns here stop and keep nothing, unless
        their reply is complete already (then it is stored: the person saw it)."""
        for key in keys:
            turn = self._running.get(key)
            if turn is not None and not turn.task.done() and not turn.replied:
                turn.lost = True
                turn.task.cancel()

    def replied(self, key: str) -> None:
        """`key`'s turn has its whole reply, shown: a lost lock no longer stops it (its
        reply is stored within the taker's `LOST_WITHIN`, which then finds it answered)."""
        turn = self._running.get(key)
        if turn is not None:
            turn.replied = True

    def _stop_here(self, session_key: str) -> bool:
        """Cancel `session_key`'s turn if it runs in this process; whether it does."""
        turn = self._running.get(session_key)
        if turn is None or turn.task.done():
            return False
        turn.stopped = True
        turn.task.cancel()
        return True

    @property
    def open_count(self) -> int:
        """How many sessions are held in memory now (at most `sessions.max_open` when idle)."""
        return self.cache.open_count

    @property
    def lock_count(self) -> int:
        """How many routing keys have a lock now (only those in use or waited for)."""
        return self.cache.lock_count

    @contextlib.asynccontextmanager
    async def locked(self, key: str) -> AsyncIterator[None]:
        """Hold `key`'s lock: one turn or command at a time per routing key (across every
        replica when the locks are shared; the cached session checked against the store)."""
        async with self.cache.locked(key):
            if self.shared is None:
                yield
                return
            async with self.shared.hold(key):
                yield

    @contextlib.asynccontextmanager
    async def try_locked(self, key: str) -> AsyncIterator[bool]:
        """Hold `key`'s lock for the block if nobody holds it now (True), else False."""
        if self.cache.busy(key):
            yield False
            return
        async with self.cache.locked(key):
            if self.shared is None:
                yield True
                return
            async with self.shared.try_hold(key) as got:
                yield got

    def busy(self, key: str) -> bool:
        """Whether a turn or command of `key` runs or waits now."""
        return self.cache.busy(key)

    async def open(self, who: MessageIdentity, session_id: int) -> OpenSession:
        """The cached session `session_id` of `who`'s key, or that session opened from the store.

        A session not cached gets new providers and the prompt stored with it;
        a session without one (new, or a compression child) gets a freshly built
        prompt, stored now and kept for its life. When the key's cached session
        is another one (the store moved on: `/new` elsewhere, or compression
        after `start_child_session`), that one is dropped and its providers shut
        down; so compression calls this with the child's id to continue in it.
        """
        key = who.session_key
        current = self.cache.get(key)
        if current is not None:
            if current.session_id == session_id and not current.stale:
                return current
            self.cache.pop(key)
            await current.manager.shutdown()  # the store moved on: don't leak its providers
        manager = self._new_manager()
        await manager.initialize(
            SessionContext(
                session_id=session_id,
                user_key=who.user_key,
                platform=who.platform,
                chat_id=who.chat_id,
                chat_type=who.chat_type,
                thread_id=who.thread_id,
            )
        )
        prompt = await self._store.get_system_prompt(session_id, who.scope)
        if prompt is None:  # set once: a prompt stored meanwhile wins, byte for byte
            prompt = await self._store.set_system_prompt(
                session_id, await self._prompts.build(who, manager)
            )
        session = OpenSession(session_id=session_id, system_prompt=prompt, manager=manager)
        self.cache.put(key, session)
        self.trim()
        return session

    def take_history(self, key: str) -> SentHistory | None:
        """The cached session's history, taken out of the cache until the turn puts it back."""
        cached = self.cache.get(key)
        if cached is None or cached.stale:
            return None
        held, cached.history = cached.history, None
        return held

    def ended(self, session_id: int, user_key: str) -> None:
        """A session ended outside `end` (compression moved on to a child): tell the
        background work, which schedules its extraction."""
        if self._events is not None:
            self._events.session_ended(session_id, user_key)

    async def end(self, session_key: str, reason: str) -> None:
        """End the session of `session_key`: its providers get the transcript, then shut
        down, and its extraction is scheduled. The next message starts a new, linked one."""
        session = self.cache.pop(session_key)
        if session is not None:
            info = await self._store.get_session(session.session_id)
        else:
            info = await self._store.current_session(session_key)
        if info is None or info.ended_at is not None:
            if session is not None:
                await session.manager.shutdown()
            return
        await self._store.end_session(info.id, reason)
        manager = session.manager if session is not None else await self._listener(info)
        stored = await self._store.get_messages(info.id, info.scope, lineage=False)
        manager.end_session([TranscriptMessage(m.role, m.content, m.timestamp) for m in stored])
        await manager.shutdown()
        self.ended(info.id, info.user_key)

    async def _listener(self, info: SessionInfo) -> MemoryManager:
        """Providers for a session that is not cached: they start only to hear of its end."""
        manager = self._new_manager()
        await manager.initialize(
            SessionContext(
                session_id=info.id,
                user_key=info.user_key,
                platform=info.source,
                chat_id=info.chat_id,
                chat_type=info.chat_type,
                thread_id=info.thread_id,
            )
        )
        return manager

    async def end_quiet(self, key: str, session_id: int, quiet_since: float) -> None:
        """End `key`'s session `session_id` for being idle (`sessions.idle_reset`), unless
        it moved on or a message came after `quiet_since` (checked under the key's lock)."""
        async with self.locked(key):
            current = await self._store.current_session(key)
            if current is None or current.id != session_id:
                return
            stored = await self._store.get_messages(session_id, current.scope, lineage=False)
            if stored and stored[-1].timestamp >= quiet_since:
                return
            await self.end(key, "idle")

    async def migrate_chat(self, platform: str, old_chat_id: str, new_chat_id: str) -> None:
        """A group got a new id (Telegram: group to supergroup): its sessions move with it.

        The cached sessions of the old chat are dropped first (their providers stop);
        they resume under the new id, from the store, at the next message.
        """
        prefix = f"{platform}:group:{old_chat_id}"
        for key in self.cache.cached_keys():
            if key == prefix or key.startswith(prefix + ":"):
                session = self.cache.pop(key)
                if session is not None:
                    await session.manager.shutdown()
        moved = await self._store.migrate_chat(platform, old_chat_id, new_chat_id)
        log.info("%s chat %s moved to %s (%d sessions)", platform, old_chat_id, new_chat_id, moved)

    async def refresh_prompts(self, user_key: str) -> None:
        """After a person removed a memory entry, no prompt of theirs may still hold it:
        their cached sessions are dropped and their stored prompts cleared, so each
        open session's next turn builds its prompt from USER.md as it is now."""
        if self._events is not None:
            await self._events.forget_person(user_key)
        await self._drop_cached(user_key)
        await self._store.clear_system_prompts(user_key)

    async def reload(self, user_key: str) -> None:
        """After a person's message or memory changed outside a turn (an edit): their
        cached sessions are marked stale and stored prompts cleared, so each key's next
        turn reads its history and builds its prompt anew (and, holding the key's lock,
        shuts the old providers down: a turn running now keeps them); their background
        work goes on."""
        for key in await self._store.user_session_keys(user_key):
            cached = self.cache.get(key)
            if cached is not None:
                cached.stale = True
        await self._store.clear_system_prompts(user_key)

    async def drop_person(self, user_key: str) -> None:
        """Drop `user_key`'s cached sessions before their data is erased.

        Background work on their data stops first, and so do their turns running
        in other chats (a group turn waiting at the model), which keep nothing; then
        each session's providers drain their queued work and stop (so nothing of
        the person is written after the erasure); the sessions are not ended, since
        their rows are about to go.
        """
        self._store.fence.erasing(user_key)  # what began before keeps nothing from now on
        if self._events is not None:
            await self._events.forget_person(user_key)
        turns = [t for t in self._running.values() if t.user_key == user_key and not t.task.done()]
        for turn in turns:
            turn.erased = True
            turn.task.cancel()
        if turns:  # a write already handed to the store lands before the erasure's (FIFO)
            await asyncio.wait([t.task for t in turns], timeout=ERASE_WAIT)
        await self._drop_cached(user_key)

    async def _drop_cached(self, user_key: str) -> None:
        for key in await self._store.user_session_keys(user_key):
            session = self.cache.pop(key)
            if session is not None:
                await session.manager.shutdown()

    def trim(self) -> None:
        """Shut the sessions kept past the bound down in the background: no turn waits."""
        self.cache.trim()

    async def close(self) -> None:
        """Stop every cached session's providers; the sessions stay open in the store.

        The next run resumes each one where it stopped, with its stored prompt.
        """
        for session in self.cache.pop_all():
            await session.manager.shutdown()
        await self.cache.retired()

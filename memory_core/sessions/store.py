"""`SessionStore`: the async session store the bot uses.

All blocking work runs off the event loop. Writes go through one dedicated
writer thread that owns the only writing connection (so they are serialised
in arrival order); a write that finds state.db locked (an operator import)
is kept and retried, never dropped, and its caller waits only up to the
`WritePolicy`'s bound before `SessionStoreBusyError` (see `writer`); reads
run on a small pool of threads, each with its own read-only connection, so
a slow search never blocks a write or the loop; a read is interrupted as
soon as its caller stops waiting or it runs past `read_timeout`, so runaway
searches cannot hold the reader threads (see `interrupts`). WAL mode lets
readers and the writer work at the same time.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import IO, TypeVar

import memory_core.sessions.activity as activity
import memory_core.sessions.backlog as backlog
import memory_core.sessions.chats as session_chats
import memory_core.sessions.deliveries as deliveries
import memory_core.sessions.edits as session_edits
import memory_core.sessions.erase as session_erase
import memory_core.sessions.inbox as session_inbox
import memory_core.sessions.jsonl as jsonl
import memory_core.sessions.reads as session_reads
import memory_core.sessions.writes as session_writes
from memory_core.errors import SessionStoreBusyError, SessionStoreError
from memory_core.fence import ErasureFence, current_mark
from memory_core.scopes import SearchScope
from memory_core.sessions.connection import ConnectHook, connect
from memory_core.sessions.db import SessionDB, open_writer
from memory_core.sessions.interrupts import ReadCall, usable
from memory_core.sessions.locks import SessionMark
from memory_core.sessions.models import (
    DEFAULT_SEARCH_OPTIONS,
    AppendResult,
    BacklogEntry,
    CounterUpdate,
    EditedMessage,
    NewMessage,
    ReviewCounters,
    ReviewDue,
    SearchOptions,
    SessionHit,
    SessionInfo,
    SessionOrigin,
    StoredMessage,
)
from memory_core.sessions.search import search_sessions
from memory_core.sessions.writer import DEFAULT_WRITE_POLICY, RetryingWriter, WritePolicy
from memory_core.sessions.writes import DeleteResult

T = TypeVar("T")
log = logging.getLogger(__name__)
READ_TIMEOUT = 10.0  # seconds; no read holds a reader thread longer, even if nobody gives up


class SessionStore:
    """Session history for async code: one writer thread, pooled readers."""

    def __init__(
        self,
        path: Path,
        *,
        readers: int = 2,
        clock: Callable[[], float] = time.time,
        on_connect: ConnectHook | None = None,
        writes: WritePolicy = DEFAULT_WRITE_POLICY,
        read_timeout: float | None = READ_TIMEOUT,
        fence: ErasureFence | None = None,
    ) -> None:
        """No I/O here; `open()` creates or migrates the database.

        A read running longer than `read_timeout` seconds is stopped with
        `ReadTimeoutError` (None: no limit). `fence`: the erasures a write that
        creates a person's rows is checked against, in the writer thread just
        before it runs (see `memory_core.fence`).
        """
        self.fence = fence if fence is not None else ErasureFence()
        self.path = Path(path)
        self._readers = max(1, readers)
        self._clock = clock
        self._on_connect = on_connect
        self._writes = writes
        self._read_timeout = read_timeout
        self._writer: RetryingWriter | None = None
        self._reader_pool: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._read_conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._prunes = deliveries.PruneTurns()

    async def open(self) -> None:
        """Create the database if needed, switch to WAL and migrate it."""
        if self._writer is not None:
            return
        opener = partial(open_writer, self.path, self._on_connect, self._writes.busy_timeout)
        writer = RetryingWriter(opener, self._writes.backoff)
        try:
            await asyncio.wrap_future(writer.start())
        except BaseException:
            await asyncio.get_running_loop().run_in_executor(None, writer.close, 0.0)
            raise
        self._writer = writer
        self._reader_pool = ThreadPoolExecutor(
            max_workers=self._readers, thread_name_prefix="mnemo-db-reader"
        )

    async def close(self) -> None:
        """Finish queued work and close every connection.

        Queued writes get up to the policy's `flush_timeout` to be stored; what
        is still queued then is lost, and logged as an error with its count.
        """
        writer, readers = self._writer, self._reader_pool
        self._writer = self._reader_pool = None
        loop = asyncio.get_running_loop()
        if readers is not None:
            await loop.run_in_executor(None, partial(readers.shutdown, wait=True))
        if writer is not None:
            lost = await loop.run_in_executor(None, writer.close, self._writes.flush_timeout)
            if lost:
                log.error(
                    "state.db stayed busy at shutdown: %d queued messages were not stored", lost
                )
        with self._lock:
            for conn in self._read_conns:
                conn.close()
            self._read_conns.clear()

    async def __aenter__(self) -> SessionStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # plumbing
    async def _write(
        self,
        fn: Callable[..., T],
        *args: object,
        count: int = 0,
        person: str | None = None,
        **kwargs: object,
    ) -> T:
        """Queue a write; wait for it up to `wait_timeout` (it stays queued after that).

        A write about `person` is refused with `PersonErasedError` if they were
        erased after the current work began: the check runs in the writer thread,
        in order with the erasure's own delete, so it cannot slip in after it.
        """
        if self._writer is None:
            raise SessionStoreError("the session store is not open")
        began = current_mark()

        def job(conn: sqlite3.Connection) -> T:
            if person is not None:
                self.fence.check(person, began)
            return fn(conn, *args, **kwargs)

        done = asyncio.wrap_future(self._writer.submit(job, messages=count))
        try:
            return await asyncio.wait_for(asyncio.shield(done), self._writes.wait_timeout)
        except TimeoutError:
            done.add_done_callback(_log_late_failure)
            raise SessionStoreBusyError(
                "state.db is busy (another process holds its write lock); "
                "the write is kept and will be stored when it frees"
            ) from None

    async def flush(self, timeout: float) -> bool:
        """Wait until every queued write is stored; False if `timeout` passed first."""
        if self._writer is None:
            return True
        return await asyncio.get_running_loop().run_in_executor(
            None, self._writer.wait_idle, timeout
        )

    async def _read(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        """Run `fn` on a reader; if the caller stops waiting, the read stops too."""
        if self._reader_pool is None:
            raise SessionStoreError("the session store is not open")
        loop = asyncio.get_running_loop()
        read = ReadCall(self._read_timeout)
        job = partial(self._with_reader, read, fn, *args, **kwargs)
        limit = None if read.limit is None else loop.call_later(read.limit, read.expire)
        try:
            return await loop.run_in_executor(self._reader_pool, job)
        except asyncio.CancelledError:
            read.cancel()  # frees the reader thread instead of finishing for nobody
            raise
        finally:
            if limit is not None:
                limit.cancel()

    def _with_reader(
        self, read: ReadCall, fn: Callable[..., T], *args: object, **kwargs: object
    ) -> T:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path, readonly=True, on_connect=self._on_connect)
            self._local.conn = conn
            with self._lock:
                self._read_conns.append(conn)
        try:
            with read.running_on(conn):
                return fn(conn, *args, **kwargs)
        finally:
            if read.stopped and not usable(conn):  # never hand on a connection left broken
                self._local.conn = None
                with self._lock:
                    self._read_conns.remove(conn)
                conn.close()

    # writes
    async def append_message(self, *, origin: SessionOrigin, message: NewMessage) -> AppendResult:
        """Append one message to the open session of `origin`, creating it lazily."""
        return await self._write(
            session_writes.append_messages, origin, [message], count=1, person=origin.user_key
        )

    async def append_messages(
        self,
        *,
        origin: SessionOrigin,
        messages: Sequence[NewMessage],
        counters: CounterUpdate | None = None,
    ) -> AppendResult:
        """Append a turn's messages in one transaction (idempotent per message).

        `counters` moves the session's review counters in the same transaction.
        If state.db stays locked past the wait bound this raises
        `SessionStoreBusyError`, and the messages are still stored later, in order.
        """
        batch = list(messages)
        return await self._write(
            session_writes.append_messages,
            origin,
            batch,
            counters,
            count=len(batch),
            person=origin.user_key,
        )

    async def set_system_prompt(self, session_id: int, prompt: str) -> str:
        """Store a session's system prompt once; return the one it keeps (see `writes`)."""
        return await self._write(session_writes.set_system_prompt, session_id, prompt)

    async def clear_system_prompts(self, user_key: str) -> int:
        """Drop the stored prompts of a person's open sessions (see `writes`)."""
        return await self._write(session_writes.clear_system_prompts, user_key)

    async def end_session(self, session_id: int, reason: str) -> None:
        await self._write(session_writes.end_session, session_id, reason, self._clock())

    async def start_child_session(
        self,
        parent_id: int,
        *,
        end_reason: str = "compression",
        model: str | None = None,
        title: str | None = None,
        messages: Sequence[NewMessage] = (),
    ) -> int:
        """End `parent_id` and start its continuation in the same lineage; return its id.

        `messages` become the child's first messages in the same transaction.
        """
        return await self._write(
            session_writes.start_child_session,
            parent_id,
            now=self._clock(),
            end_reason=end_reason,
            model=model,
            title=title,
            messages=list(messages),
            count=len(messages),
        )

    async def migrate_chat(self, source: str, old_chat_id: str, new_chat_id: str) -> int:
        """Move a chat's sessions to its new id (see `chats.migrate_chat`); how many moved."""
        return await self._write(
            session_chats.migrate_chat, source, old_chat_id, new_chat_id, self._clock()
        )

    async def record_notice(self, message_id: int, notice: str) -> bool:
        """Keep the fault line a person's message got; it then counts as answered."""
        return await self._write(session_writes.record_notice, message_id, notice)

    async def unanswered(
        self, source: str, since: float, limit: int = 100, session_key: str | None = None
    ) -> list[tuple[SessionInfo, StoredMessage]]:
        """The person's messages of `source`'s open sessions (of `session_key`, if given)
        never answered, oldest first."""
        return await self._read(session_chats.unanswered, source, since, limit, session_key)

    async def queue_message(
        self, session_key: str, user_key: str, source: str, payload: str
    ) -> int:
        """Keep a message for its busy session until its turn stores it (see `inbox`)."""
        return await self._write(
            session_inbox.queue,
            session_key,
            user_key,
            source,
            payload,
            self._clock(),
            person=user_key,
        )

    async def drop_queued(self, queue_id: int) -> None:
        """Forget a waiting message: its turn stored it."""
        await self._write(session_inbox.drop, queue_id)

    async def queued_messages(self, source: str) -> list[session_inbox.QueuedMessage]:
        """The messages of `source` still waiting for their session, oldest first."""
        return await self._read(session_inbox.waiting, source)

    async def queued_for(self, session_key: str) -> list[session_inbox.QueuedMessage]:
        """The messages of `session_key` still waiting, oldest first."""
        return await self._read(session_inbox.for_session, session_key)

    async def first_delivery(self, platform: str, delivery: str) -> bool:
        """Record that `delivery` arrived on `platform`; whether it is the first time (see
        `deliveries`: its digest is kept two days, the old ones pruned as it is written)."""
        digest = deliveries.delivery_digest(platform, delivery)
        prune = self._prunes.due()
        return await self._write(deliveries.first_delivery, digest, self._clock(), prune)

    async def delete_user(self, user_key: str, *, purge: bool = True) -> DeleteResult:
        """Erase every session and message of one person."""
        return await self._write(session_writes.delete_user, user_key, purge=purge)

    async def edit_message(
        self,
        *,
        platform: str,
        chat_id: str,
        platform_message_id: str,
        user_key: str | None,
        text: str | None,
    ) -> EditedMessage | None:
        """Give a person's stored message the text they edited it to (None: they deleted
        it); None when it is not stored (see `edits.edit_message`). `user_key` None: any
        person's message in that chat. Refused like any write about an erased person."""
        began = current_mark()
        return await self._write(
            session_edits.edit_message,
            platform=platform,
            chat_id=chat_id,
            platform_message_id=platform_message_id,
            user_key=user_key,
            text=text,
            check=partial(self.fence.check, mark=began),
            person=user_key,
        )

    async def forget_words(
        self, user_key: str, message_ids: Sequence[int], texts: Sequence[str]
    ) -> int:
        """Forget `texts` and the messages `message_ids` of `user_key` for good, down to
        the bytes on disk (see `edits.forget_words`); how many rows changed."""
        return await self._write(
            session_edits.forget_words, user_key, list(message_ids), list(texts), person=user_key
        )

    # background work (see `backlog`)
    async def mark_extracted(
        self, session_id: int, through_message_id: int, *, finished: bool
    ) -> None:
        """Extraction covered `session_id` up to that message; `finished` clears its due
        end extraction. Only moves forward; a session erased meanwhile is a no-op."""
        await self._write(backlog.mark_extracted, session_id, through_message_id, finished=finished)

    async def reset_counters(self, session_id: int) -> None:
        """Both review counters back to 0 (a background review ran); no session: no-op."""
        await self._write(backlog.reset_counters, session_id)

    async def extraction_progress(self, session_id: int) -> int | None:
        """The id of the last message extracted from a session (0: none), None if no session."""
        return await self._read(backlog.extraction_progress, session_id)

    async def pending_extractions(self, limit: int = 100) -> list[BacklogEntry]:
        """Ended sessions whose session-end extraction is due, the longest-ended first."""
        return await self._read(backlog.pending_extractions, limit)

    async def quiet_sessions(self, before: float, limit: int = 100) -> list[BacklogEntry]:
        """Open sessions quiet since before `before` with messages not yet extracted,
        the least recently active first."""
        return await self._read(backlog.quiet_sessions, before, limit)

    async def reviews_due(self, turns: int, steps: int, limit: int = 100) -> list[ReviewDue]:
        """Open sessions whose review counters reached `turns` or `steps` (0: that check off)."""
        return await self._read(backlog.reviews_due, turns, steps, limit)

    # reads
    async def search(
        self, query: str, scope: SearchScope, options: SearchOptions = DEFAULT_SEARCH_OPTIONS
    ) -> list[SessionHit]:
        """Ranked conversations of `scope` matching `query` (see `search_sessions`)."""
        return await self._read(search_sessions, query, scope, options)

    async def active_sessions(
        self, scope: SearchScope, options: SearchOptions = DEFAULT_SEARCH_OPTIONS
    ) -> tuple[list[activity.SessionActivity], int]:
        """Conversations of `scope` active in the options' window, the latest first, and
        how many there are in all (see `activity.active_sessions`)."""
        return await self._read(activity.active_sessions, scope, options)

    async def get_session(self, session_id: int) -> SessionInfo | None:
        return await self._read(session_reads.get_session, session_id)

    async def current_session(self, session_key: str) -> SessionInfo | None:
        return await self._read(session_reads.current_session, session_key)

    async def get_messages(
        self, session_id: int, scope: SearchScope, *, lineage: bool = True
    ) -> list[StoredMessage]:
        """A conversation's messages, only if it lies inside `scope`."""
        return await self._read(session_reads.get_messages, session_id, scope, lineage=lineage)

    async def list_sessions(self, scope: SearchScope, limit: int = 20) -> list[SessionInfo]:
        return await self._read(session_reads.list_sessions, scope, limit)

    async def session_mark(self, session_key: str) -> SessionMark | None:
        """The routing key's open session as a cheap `SessionMark` (None: no open one)."""
        return await self._read(session_reads.session_mark, session_key)

    async def get_system_prompt(self, session_id: int, scope: SearchScope) -> str | None:
        """The system prompt stored with a session in `scope`, or None."""
        return await self._read(session_reads.get_system_prompt, session_id, scope)

    async def get_counters(self, session_id: int) -> ReviewCounters | None:
        """A session's background-review counters, or None when there is no such session."""
        return await self._read(session_reads.get_counters, session_id)

    async def user_totals(self, user_key: str) -> session_erase.UserTotals:
        """How many sessions and messages `user_key` has."""
        return await self._read(session_erase.user_totals, user_key)

    async def all_user_totals(self) -> list[session_erase.UserTotals]:
        """Every person with a session: their sessions and messages, by user key."""
        return await self._read(session_erase.all_user_totals)

    async def user_session_keys(self, user_key: str) -> list[str]:
        """The routing keys of `user_key`'s sessions."""
        return await self._read(session_erase.user_session_keys, user_key)

    async def export_lines(self, user_key: str) -> list[str]:
        """Every message of `user_key` as import-format JSON lines (see `jsonl.export_lines`)."""
        return await self._read(lambda conn: list(jsonl.export_lines(conn, user_key)))

    # operator work
    async def import_lines(
        self, lines: IO[bytes], progress: Callable[[int], None] | None = None
    ) -> jsonl.ImportResult:
        """Import JSON Lines all or nothing (see `importer`), on a connection of its own
        in a worker thread: short transactions beside the bot's writes. `progress` is
        called there with the number of lines just done."""

        def job() -> jsonl.ImportResult:
            with self._operator_db() as db:
                return db.import_lines(lines, progress=progress)

        return await asyncio.to_thread(job)

    async def check(self, echo: Callable[[str], None]) -> None:
        """SQLite's integrity check, both full-text indexes, the message counts and the
        schema version, each passed check told to `echo`; `IndexIntegrityError` on a
        problem (see `schema.check_integrity`)."""

        def job() -> None:
            with self._operator_db() as db:
                db.check(echo)

        await asyncio.to_thread(job)

    def _operator_db(self) -> SessionDB:
        return SessionDB(self.path, clock=self._clock, on_connect=self._on_connect)


def _log_late_failure(done: asyncio.Future[object]) -> None:
    """A write whose caller stopped waiting failed later: nobody else will hear of it."""
    if not done.cancelled() and (exc := done.exception()) is not None:
        log.error("a queued write to state.db failed: %s", exc)

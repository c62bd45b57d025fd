"""`PgSessionStore`: the session store on PostgreSQL, with `SessionStore`'s semantics.

It provides `SessionBackend` like the SQLite store and returns the same values
(the same contract tests run on both). Each write is one transaction through
`PgDatabase.transact` (run again on a serialization failure or deadlock);
each read one statement on an autocommit connection. There is no queue:
a write has been committed when its call returns, so `flush` has nothing to
wait for. Several processes may share one database: a session's row lock
orders their appends, the unique indexes keep a message written twice once.

The erasure fence: `append_message(s)`, `queue_message`, `edit_message` (for
the message's author) and `forget_words` check
`fence.check(person, began)` inside their transaction, holding the person's
advisory lock shared; `delete_user` takes it exclusive, so a write that passed
its check before the erasure's tombstone commits first and is erased with the
rest, and a write checked after it is refused. `delete_user` is one
transaction; `purge` has nothing to do (PostgreSQL has no index segments to
merge; VACUUM reclaims the space). Text PostgreSQL cannot hold (NUL) is stored
as U+FFFD, where SQLite keeps it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import IO, Any, TypeVar

from psycopg import AsyncCursor

import memory_core.pg.session_deliveries as deliveries
import memory_core.pg.session_edits as edits
import memory_core.pg.session_import as session_import
import memory_core.pg.session_reads as reads
import memory_core.pg.session_rows as session_rows
import memory_core.pg.session_writes as writes
from memory_core.errors import IndexIntegrityError, SessionStoreError
from memory_core.fence import ErasureFence, current_mark
from memory_core.pg.database import Connection, PgDatabase
from memory_core.pg.fence import check_erased
from memory_core.pg.search_text import index_documents
from memory_core.pg.session_search import search_sessions
from memory_core.pg.sessions_schema import SESSION_MIGRATIONS
from memory_core.scopes import SearchScope
from memory_core.sessions.activity import SessionActivity
from memory_core.sessions.deliveries import PruneTurns, delivery_digest
from memory_core.sessions.erase import UserTotals
from memory_core.sessions.inbox import QueuedMessage
from memory_core.sessions.jsonl import ImportResult
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
from memory_core.sessions.writes import DeleteResult

T = TypeVar("T")
Lead = tuple[bytes, tuple[object, ...]]  # a write's first statement, sent with its guard
INLINE_WORDS = 2000  # characters of a batch tokenized on the event loop, not in a thread


class PgSessionStore:
    """Session history in PostgreSQL, for async code."""

    def __init__(
        self,
        db: PgDatabase,
        *,
        clock: Callable[[], float] = time.time,
        fence: ErasureFence | None = None,
    ) -> None:
        """No I/O here; `open()` migrates the schema. `db` stays its owner's to close."""
        self.db = db
        self.fence = fence if fence is not None else ErasureFence()
        self._clock = clock
        self._open = False
        self._prunes = PruneTurns()

    async def open(self) -> None:
        """Bring the "sessions" schema up to date (see `sessions_schema`)."""
        if not self._open:
            await self.db.migrate(SESSION_MIGRATIONS)
            self._open = True

    async def close(self) -> None:
        """Stop taking calls; the database pool is left to its owner."""
        self._open = False

    async def __aenter__(self) -> PgSessionStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def flush(self, timeout: float) -> bool:
        """Always True: every write is committed before its call returns."""
        return True

    # plumbing
    def _check_open(self) -> None:
        if not self._open:
            raise SessionStoreError("the session store is not open")

    async def _write(
        self, work: Callable[[Connection], Awaitable[T]], *, person: str | None = None
    ) -> T:
        """`work` in one transaction; a write about `person` checks the fence inside it."""
        self._check_open()
        began = current_mark()

        async def job(conn: Connection) -> T:
            if person is not None:
                await self._guard(conn, person, began)
            return await work(conn)

        return await self.db.transact(job)

    async def _led_write(
        self,
        lead: Lead,
        work: Callable[[Connection, AsyncCursor[Any]], Awaitable[T]],
        *,
        person: str,
    ) -> T:
        """`_write` whose first statement, `lead`, goes in the guard's round trip; `work`
        reads its cursor."""
        self._check_open()
        began = current_mark()

        async def job(conn: Connection) -> T:
            led = await self._guard(conn, person, began, lead)
            assert led is not None  # a lead was given
            return await work(conn, led)

        return await self.db.transact(job)

    async def _guard(
        self, conn: Connection, person: str, began: int, lead: Lead | None = None
    ) -> AsyncCursor[Any] | None:
        """Hold `person`'s lock shared and refuse the write if they were erased since
        `began`. With the replicas' tombstones, the lock and their check go in one round
        trip (a pipeline): still two statements, the check run once the lock is held,
        with a snapshot of its own (an erasure that held the lock is committed by then).
        `lead`, the write's first statement, goes in that round trip too, once the lock
        is held (rolled back with the rest when the check refuses); its cursor, unread."""
        if self.fence.remote is None:
            await writes.lock_person(conn, person, exclusive=False)
            self.fence.check(person, began)
            return None if lead is None else await conn.execute(*lead)
        async with conn.pipeline():
            await writes.lock_person(conn, person, exclusive=False)
            led = None if lead is None else await conn.execute(*lead)
            await check_erased(conn, person, began)  # erased by another replica, too
        self.fence.check(person, began)
        return led

    async def _read(self, work: Callable[[Connection], Awaitable[T]]) -> T:
        self._check_open()
        return await self.db.read(work)

    @staticmethod
    async def _words(messages: Sequence[NewMessage]) -> list[str | None]:
        """The messages' tsvector literals: a turn's few short messages on the event loop
        (tens of microseconds, less than handing them to a thread costs), longer texts
        off it."""
        if not messages:
            return []
        rows = [writes.index_row(m) for m in messages]
        if sum(len(row[1]) for row in rows) <= INLINE_WORDS:
            return index_documents(rows)
        return await asyncio.to_thread(index_documents, rows)

    # writes
    async def append_message(self, *, origin: SessionOrigin, message: NewMessage) -> AppendResult:
        """Append one message to the open session of `origin`, creating it lazily."""
        return await self.append_messages(origin=origin, messages=[message])

    async def append_messages(
        self,
        *,
        origin: SessionOrigin,
        messages: Sequence[NewMessage],
        counters: CounterUpdate | None = None,
    ) -> AppendResult:
        """Append a turn's messages in one transaction (idempotent per message)."""
        batch = list(messages)
        words = await self._words(batch)
        return await self._led_write(
            writes.open_session_lookup(origin),  # the session's lookup, with the guard
            lambda conn, found: writes.append_messages(conn, origin, batch, words, counters, found),
            person=origin.user_key,
        )

    async def set_system_prompt(self, session_id: int, prompt: str) -> str:
        """Store a session's system prompt once; return the one it keeps."""
        return await self._write(lambda conn: writes.set_system_prompt(conn, session_id, prompt))

    async def clear_system_prompts(self, user_key: str) -> int:
        """Drop the stored prompts of a person's open sessions; how many."""
        return await self._write(lambda conn: writes.clear_system_prompts(conn, user_key))

    async def end_session(self, session_id: int, reason: str) -> None:
        now = self._clock()
        await self._write(lambda conn: writes.end_session(conn, session_id, reason, now))

    async def start_child_session(
        self,
        parent_id: int,
        *,
        end_reason: str = "compression",
        model: str | None = None,
        title: str | None = None,
        messages: Sequence[NewMessage] = (),
    ) -> int:
        """End `parent_id` and start its continuation in the same lineage; return its id."""
        batch = list(messages)
        words = await self._words(batch)
        now = self._clock()
        return await self._write(
            lambda conn: writes.start_child_session(
                conn,
                parent_id,
                now=now,
                end_reason=end_reason,
                model=model,
                title=title,
                messages=batch,
                words=words,
            )
        )

    async def migrate_chat(self, source: str, old_chat_id: str, new_chat_id: str) -> int:
        """Move a chat's sessions to its new id (see `chats.migrate_chat`); how many moved."""
        now = self._clock()
        return await self._write(
            lambda conn: writes.migrate_chat(conn, source, old_chat_id, new_chat_id, now)
        )

    async def record_notice(self, message_id: int, notice: str) -> bool:
        """Keep the fault line a person's message got; it then counts as answered."""
        return await self._write(lambda conn: writes.record_notice(conn, message_id, notice))

    async def unanswered(
        self, source: str, since: float, limit: int = 100, session_key: str | None = None
    ) -> list[tuple[SessionInfo, StoredMessage]]:
        """The person's messages of `source`'s open sessions (of `session_key`, if given)
        never answered, oldest first."""
        return await self._read(
            lambda conn: reads.unanswered(conn, source, since, limit, session_key)
        )

    async def queue_message(
        self, session_key: str, user_key: str, source: str, payload: str
    ) -> int:
        """Keep a message for its busy session until its turn stores it (see `inbox`)."""
        now = self._clock()
        return await self._led_write(
            writes.queue_insert(session_key, user_key, source, payload, now),
            writes.queued_id,
            person=user_key,
        )

    async def drop_queued(self, queue_id: int) -> None:
        """Forget a waiting message: its turn stored it."""
        await self._write(lambda conn: writes.drop_queued(conn, queue_id))

    async def queued_messages(self, source: str) -> list[QueuedMessage]:
        """The messages of `source` still waiting for their session, oldest first."""
        return await self._read(lambda conn: reads.queued_messages(conn, source))

    async def queued_for(self, session_key: str) -> list[QueuedMessage]:
        """The messages of `session_key` still waiting, oldest first."""
        return await self._read(lambda conn: reads.queued_for(conn, session_key))

    async def first_delivery(self, platform: str, delivery: str) -> bool:
        """Record that `delivery` arrived on `platform`; whether it is the first time, of
        every replica on this database (see `session_deliveries`)."""
        digest, claim = delivery_digest(platform, delivery), os.urandom(16)
        prune, now = self._prunes.due(), self._clock()
        return await self._write(
            lambda conn: deliveries.first_delivery(conn, digest, claim, now, prune)
        )

    async def delete_user(self, user_key: str, *, purge: bool = True) -> DeleteResult:
        """Erase every session, message and waiting message of one person, in one transaction."""
        return await self._write(lambda conn: writes.delete_user(conn, user_key))

    async def edit_message(
        self,
        *,
        platform: str,
        chat_id: str,
        platform_message_id: str,
        user_key: str | None,
        text: str | None,
    ) -> EditedMessage | None:
        """Give a person's stored message its edited text (None: deleted); None when it
        is not stored (see `session_edits`). Checks the author's fence in the write."""
        self._check_open()
        began = current_mark()

        async def guard(conn: Connection, person: str) -> None:
            await self._guard(conn, person, began)

        return await self._write(
            lambda conn: edits.edit_message(
                conn,
                platform=platform,
                chat_id=chat_id,
                platform_message_id=platform_message_id,
                user_key=user_key,
                text=text,
                guard=guard,
            )
        )

    async def forget_words(
        self, user_key: str, message_ids: Sequence[int], texts: Sequence[str]
    ) -> int:
        """Forget `texts` and the messages `message_ids` of `user_key` for good, in one
        transaction (see `session_edits`); how many rows changed."""
        ids, needles = list(message_ids), list(texts)
        return await self._write(
            lambda conn: edits.forget_words(conn, user_key, ids, needles), person=user_key
        )

    # background work
    async def mark_extracted(
        self, session_id: int, through_message_id: int, *, finished: bool
    ) -> None:
        """Extraction covered `session_id` up to that message (only moves forward)."""
        await self._write(
            lambda conn: writes.mark_extracted(
                conn, session_id, through_message_id, finished=finished
            )
        )

    async def reset_counters(self, session_id: int) -> None:
        """Both review counters back to 0; no session: no-op."""
        await self._write(lambda conn: writes.reset_counters(conn, session_id))

    async def extraction_progress(self, session_id: int) -> int | None:
        return await self._read(lambda conn: reads.extraction_progress(conn, session_id))

    async def pending_extractions(self, limit: int = 100) -> list[BacklogEntry]:
        return await self._read(lambda conn: reads.pending_extractions(conn, limit))

    async def quiet_sessions(self, before: float, limit: int = 100) -> list[BacklogEntry]:
        return await self._read(lambda conn: reads.quiet_sessions(conn, before, limit))

    async def reviews_due(self, turns: int, steps: int, limit: int = 100) -> list[ReviewDue]:
        return await self._read(lambda conn: reads.reviews_due(conn, turns, steps, limit))

    # reads
    async def search(
        self, query: str, scope: SearchScope, options: SearchOptions = DEFAULT_SEARCH_OPTIONS
    ) -> list[SessionHit]:
        """Ranked conversations of `scope` matching `query` (see `session_search`)."""
        return await self._read(lambda conn: search_sessions(conn, scope, query, options))

    async def active_sessions(
        self, scope: SearchScope, options: SearchOptions = DEFAULT_SEARCH_OPTIONS
    ) -> tuple[list[SessionActivity], int]:
        """Conversations of `scope` active in the options' window, the latest first, and
        how many there are in all."""
        return await self._read(lambda conn: reads.active_sessions(conn, scope, options))

    async def get_session(self, session_id: int) -> SessionInfo | None:
        return await self._read(lambda conn: reads.get_session(conn, session_id))

    async def current_session(self, session_key: str) -> SessionInfo | None:
        return await self._read(lambda conn: reads.current_session(conn, session_key))

    async def get_messages(
        self, session_id: int, scope: SearchScope, *, lineage: bool = True
    ) -> list[StoredMessage]:
        """A conversation's messages, only if it lies inside `scope`."""
        return await self._read(
            lambda conn: reads.get_messages(conn, session_id, scope, lineage=lineage)
        )

    async def session_mark(self, session_key: str) -> SessionMark | None:
        """The routing key's open session as a cheap `SessionMark` (None: no open one)."""
        return await self._read(lambda conn: reads.session_mark(conn, session_key))

    async def list_sessions(self, scope: SearchScope, limit: int = 20) -> list[SessionInfo]:
        return await self._read(lambda conn: reads.list_sessions(conn, scope, limit))

    async def get_system_prompt(self, session_id: int, scope: SearchScope) -> str | None:
        return await self._read(lambda conn: reads.get_system_prompt(conn, session_id, scope))

    async def get_counters(self, session_id: int) -> ReviewCounters | None:
        return await self._read(lambda conn: reads.get_counters(conn, session_id))

    async def user_totals(self, user_key: str) -> UserTotals:
        return await self._read(lambda conn: reads.user_totals(conn, user_key))

    async def all_user_totals(self) -> list[UserTotals]:
        return await self._read(reads.all_user_totals)

    async def user_session_keys(self, user_key: str) -> list[str]:
        return await self._read(lambda conn: reads.user_session_keys(conn, user_key))

    async def export_lines(self, user_key: str) -> list[str]:
        """Every message of `user_key` as import-format JSON lines (see `jsonl.export_lines`)."""
        return await self._read(lambda conn: reads.export_lines(conn, user_key))

    # operator work
    async def import_lines(
        self, lines: IO[bytes], progress: Callable[[int], None] | None = None
    ) -> ImportResult:
        """Import JSON Lines all or nothing, in one transaction (see `session_import`)."""
        self._check_open()
        return await session_import.import_lines(self.db, lines, progress=progress)

    async def check(self, echo: Callable[[str], None]) -> None:
        """The session rows against what their content gives (counts, owner tokens,
        every message's words and symbols: `session_rows.check_rows`), each passed
        check told to `echo`; `IndexIntegrityError` naming what is wrong. The schema
        is this code's: `open` migrated it."""
        self._check_open()
        found = await session_rows.check_rows(self.db)
        wrong = "; ".join(f"{n} rows with wrong {what}" for what, n in found.items() if n)
        if wrong:
            raise IndexIntegrityError(f"the session tables are damaged: {wrong}")
        for what in found:
            echo(f"ok   {what}")
        echo(f"ok   schema version {max(s.version for s in SESSION_MIGRATIONS)}")

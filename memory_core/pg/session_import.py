"""Loading JSON Lines into the PostgreSQL session tables: one transaction, rows by COPY.

The lines are parsed and checked by the SQLite importer's own parser
(`jsonl.parsed_batches`: same errors, same line numbers), sessions are
matched and messages deduplicated the same way (`fingerprint`), and the
result is the same `ImportResult`. What differs is how all-or-nothing is
kept. SQLite has one writer, so its import stages rows in short transactions
under a hidden user key; PostgreSQL lets live writes go on beside a long
transaction (MVCC), so here the whole import is ONE transaction and nothing
of it is visible to anyone before it commits. A bad line, a crash or a lost
connection rolls everything back.

Rows are written with ``COPY … FROM STDIN`` in chunks of `CHUNK_ROWS`
messages: the new sessions of a chunk first, then its messages, each with its
tsvector (`search_text.index_documents`, made for the next chunks while one is
copied: in worker processes for a large import, see `import_words`) and
`symbols` value. The stored sessions of a batch's new session names are looked
up together (`_Import.look_up`). Into an empty `messages` table, its indexes but
the unique ones are dropped first and built after the load, in one pass each
(`_defer_indexes`): the import then holds the table alone (a live write to it
waits for the commit), so this is done only when the lock is had at once (else
the import goes on beside the others, its indexes kept live). A session the
import creates is locked by nobody else (nobody can see it). A session that
already existed is only touched at the very end: its new messages wait in a
temporary table and move in with one ``INSERT … SELECT``, and its bounds are
updated just before the commit, so a live write to that session waits for
the last moments of the import, not for all of it.

Imports take a transaction-level advisory lock (`IMPORT_LOCK`): one at a
time per database; a second one fails at once with `SessionStoreBusyError`.

Before the commit the search indexes are put in order (`after_bulk_load`): rows
loaded this way sit in GIN's pending list, which every search then reads whole,
and a GIN index filled row by row is several times the size of one built in a
pass. An import that brings at least a third of what the table held rebuilds
them (REINDEX, then ANALYZE, so the planner knows the new rows); a smaller one
only merges its pending entries into the index (`gin_clean_pending_list`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, cast

from psycopg import AsyncConnection, errors

from memory_core.errors import ImportFormatError, SessionConflictError, SessionStoreBusyError
from memory_core.pg.database import PgDatabase
from memory_core.pg.import_words import ImportWords, symbols_value
from memory_core.scopes import ChatType
from memory_core.sessions.jsonl import (
    Batch,
    ImportResult,
    Message,
    fingerprint,
    parse_bot_session_id,
    parsed_batches,
)
from memory_core.sessions.sql import POSTGRES
from memory_core.sessions.sql.imports import (
    BOT_SESSION,
    EXTENDED_SESSION,
    NAMED_SESSION,
    stored_messages,
)
from memory_core.sessions.word_index import owner_token

__all__ = [
    "AFTER_BULK_LOAD",
    "CHUNK_ROWS",
    "IMPORT_LOCK",
    "SEARCH_INDEXES",
    "after_bulk_load",
    "import_lines",
    "symbols_value",
]

CHUNK_ROWS = 10_000
QUEUED_CHUNKS = 1  # chunks whose words are made while the one before them is written
DEFER_LOCK_WAIT = "1s"  # how long an import into an empty table waits to have it alone
# Held for the import's transaction: sha256("mnemo_session_import")[:8] as a signed bigint.
IMPORT_LOCK = int.from_bytes(
    hashlib.sha256(b"mnemo_session_import").digest()[:8], "big", signed=True
)
SEARCH_INDEXES = ("messages_words", "messages_symbols")  # the GIN indexes searches read
# After a bulk load, in its transaction: the search indexes built again in one pass,
# and the statistics the planner chooses its plans by taken over the new rows.
AFTER_BULK_LOAD = (
    *(f"REINDEX INDEX {index}".encode() for index in SEARCH_INDEXES),
    b"ANALYZE sessions",
    b"ANALYZE messages",
)
REBUILD_SHARE = 3  # an import of at least 1/3 of the rows held before rebuilds
_MESSAGE_COLUMNS = (
    "session_id, role, content, tool_name, tool_calls, tool_call_id, timestamp, "
    "speaker_name, words, symbols"
)
_SESSION_COPY = (
    "COPY sessions (id, root_id, source, user_key, owner_token, chat_id, chat_type, "
    "started_at, ended_at, end_reason, external_id) FROM STDIN"
)
_WRITE_PARTS = 4000  # the parts of COPY lines joined for one write (2000 lines)
_EXTRA = "import_extra_messages"  # the temporary table of rows for existing sessions
_CREATE_EXTRA = (
    f"CREATE TEMPORARY TABLE {_EXTRA} (ord BIGINT NOT NULL, session_id BIGINT NOT NULL, "
    "role TEXT NOT NULL, content TEXT NOT NULL, tool_name TEXT, tool_calls TEXT, "
    "tool_call_id TEXT, timestamp DOUBLE PRECISION NOT NULL, speaker_name TEXT, "
    "words TSVECTOR, symbols TEXT) ON COMMIT DROP"
)

Connection = AsyncConnection[Any]


@dataclass
class _Session:
    platform: str
    user: str
    external_id: str
    chat: str
    chat_type: ChatType
    first: float
    last: float
    existing: int | None = None  # the stored session this import extends
    known: set[str] | None = None  # fingerprints of its stored messages
    id: int | None = None  # a new session's id, given with its first chunk
    written: tuple[float, float] | None = None  # (first, last) as its row holds them
    tag: bytes = b""  # a new session's id and a tab: what its COPY lines start with
    added: bool = False  # a message of this import goes to it

    @property
    def target(self) -> int | None:
        return self.existing if self.existing is not None else self.id


@dataclass
class _Import:
    """One import's sessions, the rows waiting for their chunk, and counts."""

    conn: Connection
    chunk_rows: int
    sessions: dict[tuple[str, str, str], _Session] = field(default_factory=dict)
    by_head: dict[tuple[str, ...], _Session] = field(default_factory=dict)
    pending: list[tuple[_Session, Message]] = field(default_factory=list)
    inserted: int = 0
    skipped: int = 0
    extra_rows: int = 0
    held: float = 0.0  # the messages the table held before (the planner's estimate)
    copying: asyncio.Task[None] | None = None  # the last chunk's COPY, still running
    words: ImportWords = field(default_factory=ImportWords)
    queued: deque[tuple[list[tuple[_Session, Message]], asyncio.Future[list[bytes]]]] = field(
        default_factory=deque
    )  # chunks whose COPY lines are being made, oldest first

    async def add(self, message: Message) -> None:
        session = self.by_head.get(message.head)
        if session is None:
            session = self.by_head[message.head] = await self._session(message)
        ts = message.timestamp
        session.first = min(session.first, ts)
        session.last = max(session.last, ts)
        if session.known is not None:
            mark = fingerprint(message.role, ts, message.content, message.name)
            if mark in session.known:
                self.skipped += 1
                return
            session.known.add(mark)
        session.added = True
        self.pending.append((session, message))
        if len(self.pending) >= self.chunk_rows:
            await self.flush()

    async def flush(self) -> None:
        """Queue the pending rows, their COPY lines started (`import_words`: in worker
        processes for a large import); with more than `QUEUED_CHUNKS` queued, the oldest is
        written. So the lines of the chunks queued are made while the last one's COPY runs."""
        if not self.pending:
            return
        chunk, self.pending = self.pending, []
        rows = [(m.role, m.content, m.tool_name, m.tool_calls, m.tool_call_id, m.timestamp,
                 m.name) for _, m in chunk]  # fmt: skip
        self.queued.append((chunk, asyncio.ensure_future(self.words.lines(rows))))
        if len(self.queued) > QUEUED_CHUNKS:
            await self._write_oldest()

    async def _write_oldest(self) -> None:
        """COPY the oldest queued chunk once the COPY before it is done: its new sessions
        first, then its messages; the COPY of this chunk is left running."""
        chunk, made = self.queued.popleft()
        try:
            await self.copied()
            await self._create_sessions([s for s, _ in chunk if s.target is None])
            lines = await made
        finally:
            if not made.done():
                made.cancel()
        fresh: list[bytes] = []  # each line after its session's id
        extra: list[bytes] = []  # after its order and its session's id
        for (s, _), line in zip(chunk, lines, strict=True):
            if s.existing is None:
                fresh += (s.tag, line)
            else:
                self.extra_rows += 1
                extra += (b"%d\t%d\t" % (self.extra_rows, s.existing), line)
        first_extra = bool(extra) and self.extra_rows * 2 == len(extra)
        self.inserted += len(chunk)
        self.copying = asyncio.create_task(self._copy_rows(fresh, extra, first_extra))

    async def abandon(self) -> None:
        """After a failure: the queued words given up, the running COPY ended, the pool too."""
        for _, words in self.queued:
            words.cancel()
        self.queued.clear()
        if self.copying is not None:  # the COPY ends before the rollback
            with contextlib.suppress(Exception):
                await self.copied()
        await self.words.close()

    async def copied(self) -> None:
        """Wait for the COPY left running (its error, if any, is raised here)."""
        task, self.copying = self.copying, None
        if task is not None:
            await task

    async def _copy_rows(self, fresh: list[bytes], extra: list[bytes], first: bool) -> None:
        await _copy_lines(self.conn, f"COPY messages ({_MESSAGE_COLUMNS}) FROM STDIN", fresh)
        if extra:
            if first:
                await self.conn.execute(_CREATE_EXTRA)
            await _copy_lines(
                self.conn, f"COPY {_EXTRA} (ord, {_MESSAGE_COLUMNS}) FROM STDIN", extra
            )

    async def finish(self) -> None:
        """The last chunk, the rows for existing sessions, every session's bounds."""
        await self.flush()
        while self.queued:
            await self._write_oldest()
        await self.copied()
        if self.extra_rows:
            await self.conn.execute(
                f"INSERT INTO messages ({_MESSAGE_COLUMNS}) "
                f"SELECT {_MESSAGE_COLUMNS} FROM {_EXTRA} ORDER BY ord"
            )
        moved = [(s.first, s.last, s.id) for s in self.sessions.values()
                 if s.id is not None and s.written != (s.first, s.last)]  # fmt: skip
        async with self.conn.cursor() as cur:
            if moved:
                await cur.executemany(
                    "UPDATE sessions SET started_at = %s, ended_at = %s WHERE id = %s", moved
                )
            extended = [(s.first, s.first, s.last, s.existing) for s in self.sessions.values()
                        if s.existing is not None and s.added]  # fmt: skip
            if extended:
                await cur.executemany(EXTENDED_SESSION.postgres, extended)

    def result(self, lines: int) -> ImportResult:
        created = sum(1 for s in self.sessions.values() if s.existing is None)
        return ImportResult(
            lines=lines,
            sessions_created=created,
            sessions_extended=len(self.sessions) - created,
            messages_inserted=self.inserted,
            messages_skipped=self.skipped,
        )

    async def _create_sessions(self, new: list[_Session]) -> None:
        unique = list({id(s): s for s in new}.values())  # in order of first appearance
        if not unique:
            return
        cur = await self.conn.execute(
            "SELECT nextval(pg_get_serial_sequence('sessions', 'id')) FROM generate_series(1, %s)",
            (len(unique),),
        )
        ids = sorted(int(row[0]) for row in await cur.fetchall())
        rows = []
        for s, session_id in zip(unique, ids, strict=True):
            s.id, s.written, s.tag = session_id, (s.first, s.last), b"%d\t" % session_id
            rows.append((session_id, session_id, s.platform, s.user, owner_token(s.user), s.chat,
                         s.chat_type, s.first, s.last, "imported", s.external_id))  # fmt: skip
        await _copy(self.conn, _SESSION_COPY, rows)

    async def look_up(self, batch: Sequence[Message]) -> None:
        """Find the stored sessions of a batch's new session names at once (three
        statements for the batch, not up to three for each session), as `_find` would."""
        first: dict[tuple[str, str, str], Message] = {}
        for message in batch:
            key = message.head[:3]
            if key not in self.sessions and key not in first:
                first[key] = message
        if len(first) < 2:  # `_session` finds the one left
            return
        keys = list(first)
        cur = await self.conn.execute(
            "SELECT source, user_key, external_id, id, chat_id, chat_type FROM sessions "
            "WHERE (source, user_key, external_id) IN "
            "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]))",
            ([k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]),
        )
        found: dict[tuple[str, str, str], tuple[Any, ...]] = {
            (r[0], r[1], r[2]): r[3:] for r in await cur.fetchall()
        }
        own = {k: parsed for k in keys if k not in found
               and (parsed := parse_bot_session_id(k[2])) is not None}  # fmt: skip
        if own:
            cur = await self.conn.execute(
                "SELECT s.id, t.n, s.chat_id, s.chat_type FROM sessions s JOIN unnest("
                "%s::bigint[], %s::float8[], %s::text[], %s::text[]) WITH ORDINALITY "
                "AS t(id, started, source, user_key, n) ON s.id = t.id AND s.started_at = "
                "t.started AND s.source = t.source AND s.user_key = t.user_key "
                "WHERE s.external_id IS NULL",
                ([p[0] for p in own.values()], [p[1] for p in own.values()],
                 [k[0] for k in own], [k[1] for k in own]),
            )  # fmt: skip
            mine = list(own)
            for r in await cur.fetchall():
                found[mine[int(r[1]) - 1]] = (r[0], r[2], r[3])
        known: dict[int, set[str]] = {int(r[0]): set() for r in found.values()}
        if known:
            cur = await self.conn.execute(*stored_messages(POSTGRES, list(known)))
            for sid, role, ts, content, name in await cur.fetchall():
                known[int(sid)].add(fingerprint(role, ts, content, name))
        for key, message in first.items():
            ts = message.timestamp
            row = found.get(key)
            if row is None:
                chat_type = cast(ChatType, message.head[4])  # checked by parse_line
                self.sessions[key] = _Session(*key, message.head[3], chat_type, ts, ts)
            else:
                sid = int(row[0])
                self.sessions[key] = _Session(
                    *key, row[1], row[2], ts, ts, existing=sid, known=known[sid]
                )

    async def _session(self, message: Message) -> _Session:
        key = message.head[:3]
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = await self._find(key, message)
        if (session.chat, session.chat_type) != message.head[3:]:
            chat, chat_type = message.head[3:]
            raise ImportFormatError(
                message.line,
                f"session {session.external_id[:60]!r} is in chat {session.chat[:60]!r} "
                f"({session.chat_type}), not {chat[:60]!r} ({chat_type})",
            )
        return session

    async def _find(self, key: tuple[str, str, str], message: Message) -> _Session:
        ts = message.timestamp
        cur = await self.conn.execute(NAMED_SESSION.postgres, key)
        row = await cur.fetchone()
        own = parse_bot_session_id(key[2])
        if row is None and own is not None:  # exported from a session the bot made here
            cur = await self.conn.execute(BOT_SESSION.postgres, (*own, *key[:2]))
            row = await cur.fetchone()
        if row is None:
            chat_type = cast(ChatType, message.head[4])  # checked by parse_line
            return _Session(*key, message.head[3], chat_type, ts, ts)
        cur = await self.conn.execute(*stored_messages(POSTGRES, [row[0]]))
        known = {fingerprint(r, t, c, n) for _, r, t, c, n in await cur.fetchall()}
        return _Session(*key, row[1], row[2], ts, ts, existing=int(row[0]), known=known)


async def _rows_held(conn: Connection) -> float:
    """About how many messages the table holds (the planner's figure; 0 if never counted)."""
    cur = await conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'messages'::regclass")
    row = await cur.fetchone()
    return max(0.0, float(row[0])) if row else 0.0


async def after_bulk_load(conn: Connection, inserted: int, held: float) -> None:
    """Put the search indexes in order after `inserted` messages were loaded into a table
    of about `held`: rebuilt (`AFTER_BULK_LOAD`) when the load is a large share of it,
    else only the load's pending entries merged into them (see the module docstring)."""
    if inserted <= 0:
        return
    if inserted * REBUILD_SHARE >= held:
        for statement in AFTER_BULK_LOAD:
            await conn.execute(statement)
        return
    for index in SEARCH_INDEXES:
        await conn.execute("SELECT gin_clean_pending_list(%s::regclass)", (index,))


async def _defer_indexes(conn: Connection) -> list[str]:
    """Into an empty `messages`, its indexes but the unique ones dropped, to be built after
    the load (`_build_indexes`): the definitions, or [] when the table holds rows or
    another transaction uses it (its lock not had within `DEFER_LOCK_WAIT`)."""
    cur = await conn.execute("SELECT EXISTS (SELECT 1 FROM messages)")
    row = await cur.fetchone()
    if row is None or row[0]:
        return []
    cur = await conn.execute(
        "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index "
        "WHERE indrelid = 'messages'::regclass AND NOT indisunique ORDER BY indexrelid"
    )
    indexes = [(str(name), str(definition)) for name, definition in await cur.fetchall()]
    if not indexes:
        return []
    cur = await conn.execute("SELECT current_setting('lock_timeout')")
    was = await cur.fetchone()
    try:
        async with conn.transaction():  # a savepoint: given up, the import goes on as usual
            await conn.execute("SELECT set_config('lock_timeout', %s, true)", (DEFER_LOCK_WAIT,))
            await conn.execute(f"DROP INDEX {', '.join(name for name, _ in indexes)}")
    except errors.LockNotAvailable:
        return []
    finally:
        await conn.execute("SELECT set_config('lock_timeout', %s, true)", (was[0] if was else "0",))
    return [definition for _, definition in indexes]


async def _build_indexes(conn: Connection, definitions: list[str]) -> None:
    """Build the indexes `_defer_indexes` dropped, each in one pass over the loaded rows,
    then take the planner's statistics of them."""
    await conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
    for definition in definitions:
        await conn.execute(definition.encode())
    await conn.execute("ANALYZE sessions")
    await conn.execute("ANALYZE messages")


async def _copy(conn: Connection, statement: str, rows: Sequence[Sequence[object]]) -> None:
    if not rows:
        return
    async with conn.cursor() as cur, cur.copy(statement) as copy:
        for row in rows:
            await copy.write_row(row)


async def _copy_lines(conn: Connection, statement: str, parts: list[bytes]) -> None:
    """COPY text lines made beforehand (`import_words.copy_lines`), a few MB a write."""
    if not parts:
        return
    async with conn.cursor() as cur, cur.copy(statement) as copy:
        for n in range(0, len(parts), _WRITE_PARTS):
            await copy.write(b"".join(parts[n : n + _WRITE_PARTS]))


async def _batches(lines: Iterable[bytes | str] | IO[bytes]) -> AsyncIterator[Batch]:
    """`parsed_batches`, each batch waited for on a thread so the event loop runs meanwhile."""
    batches: Iterator[Batch] = parsed_batches(lines)
    done = object()
    try:
        while (batch := await asyncio.to_thread(next, batches, done)) is not done:
            yield cast(Batch, batch)
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            await asyncio.to_thread(close)  # stops the parser's thread or process


async def import_lines(
    db: PgDatabase,
    lines: Iterable[bytes | str] | IO[bytes],
    *,
    progress: Callable[[int], None] | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> ImportResult:
    """Import JSON Lines (bytes or text, one message each, or a binary file): all or nothing.

    The same checks, matching and result as SQLite's `importer.import_lines`;
    `progress` is called with the number of lines just done. A bad line raises
    `ImportFormatError` and nothing stays; another import running raises
    `SessionStoreBusyError`; a session created meanwhile by another writer
    under one of the imported names raises `SessionConflictError`.
    """
    count = 0
    try:
        async with db.transaction() as conn:
            cur = await conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (IMPORT_LOCK,))
            locked = await cur.fetchone()
            if not (locked and locked[0]):
                raise SessionStoreBusyError(
                    "another import into this database is running; wait for it to finish"
                )
            # the GIN upkeep of a large load: more memory for it, merged less often
            await conn.execute("SET LOCAL work_mem = '256MB'")
            await conn.execute("SET LOCAL gin_pending_list_limit = '64MB'")
            run = _Import(conn, max(1, chunk_rows))
            run.held = await _rows_held(conn)
            deferred = await _defer_indexes(conn)
            try:
                async for batch, consumed in _batches(lines):
                    await run.look_up(batch)
                    for message in batch:
                        await run.add(message)
                    count += consumed
                    if progress is not None:
                        progress(consumed)
                await run.finish()
                if deferred:  # built in one pass: nothing for after_bulk_load to rebuild
                    await _build_indexes(conn, deferred)
                else:
                    await after_bulk_load(conn, run.inserted, run.held)
            finally:
                await run.abandon()  # after a failure; else only the pool to end
    except errors.UniqueViolation:
        raise SessionConflictError(
            "another writer created one of the imported sessions meanwhile; "
            "nothing was imported, run the import again"
        ) from None
    return run.result(count)

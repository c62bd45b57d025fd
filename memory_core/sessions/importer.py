"""Loading an import into state.db in short transactions, invisible until complete.

An import must not hold the write lock for long (the bot's messages wait
behind it), and it must stay all-or-nothing: a bad line, a crash or a SIGKILL
leaves nothing visible. So it stages. Rows are written in transactions of at
most `CHUNK_ROWS` messages, into sessions whose user key is a staging key
(``~import <token> <user key>``, which `check_user_key` never accepts), so no
scope matches them and no read, search or export sees them. Each chunk
indexes its own rows in one statement, with the insert trigger dropped and
put back inside the chunk's transaction, so a live message written between
two chunks is indexed by the trigger as usual.

When every line has been read and checked, one short transaction publishes
the import: a new session gets its real user key (its owner token, and so its
index entries, were right from the start), and messages added to a session
that already existed move from their staged shadow session into it. A bad
line discards what was staged.

The lines are parsed and checked beside the writing, in a forked process
for a large file (a thread would share the GIL with the writer), and the
importing connection gets a larger page cache while it writes.

Imports hold an exclusive lock on a file beside the database
(``state.db-import.lock``), so they run one at a time; an import that finds
staged rows while holding the lock knows they were left by one that died (a
SIGKILL, a power cut) and deletes them first. Until then they only take space.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

from memory_core.errors import (
    ImportFormatError,
    SessionConflictError,
    SessionStoreBusyError,
    SessionStoreError,
)
from memory_core.scopes import ChatType
from memory_core.sessions.connection import transaction
from memory_core.sessions.jsonl import (
    ImportResult,
    Message,
    fingerprint,
    parse_bot_session_id,
    parsed_batches,
)
from memory_core.sessions.schema import (
    create_insert_trigger,
    drop_insert_trigger,
    index_rows_after,
    recount_messages,
)
from memory_core.sessions.sql import SQLITE
from memory_core.sessions.sql.imports import (
    BOT_SESSION,
    EXTENDED_SESSION,
    NAMED_SESSION,
    stored_messages,
)
from memory_core.sessions.sql.writes import ROOT_ITSELF
from memory_core.sessions.word_index import owner_token

STAGED_PREFIX = "~import "
CHUNK_ROWS = 5000  # about 0.5 s of writing: the longest a live message waits for an import
IMPORT_CACHE_KIB = 64 << 10  # the importing connection's page cache, 64 MiB
_STAGED_END = "~import!"  # the first key above every staging key

_INSERT = (
    "INSERT INTO messages(session_id, role, content, tool_name, tool_calls, tool_call_id, "
    "timestamp, speaker_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_OWNER_TRIGGER = "sessions_owner_fixed"


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
    staged: int | None = None  # the staging session, made with its first chunk

    @property
    def chat_key(self) -> tuple[str, str]:
        return (self.chat, self.chat_type)


def _chat_mismatch(session: _Session, message: Message) -> ImportFormatError:
    chat, chat_type = message.head[3:]
    return ImportFormatError(
        message.line,
        f"session {session.external_id[:60]!r} is in chat {session.chat[:60]!r} "
        f"({session.chat_type}), not {chat[:60]!r} ({chat_type})",
    )


class _StagedImport:
    """One import: sessions seen so far, rows waiting for their chunk, staging ids."""

    def __init__(self, conn: sqlite3.Connection, chunk_rows: int) -> None:
        self.conn = conn
        self.prefix = f"{STAGED_PREFIX}{secrets.token_hex(6)} "
        self.chunk_rows = max(1, chunk_rows)
        self.sessions: dict[tuple[str, str, str], _Session] = {}
        self.by_head: dict[tuple[str, ...], _Session] = {}  # chat checked for these
        self.pending: list[tuple[_Session, Message]] = []
        self.inserted = 0
        self.skipped = 0

    def add(self, message: Message) -> None:
        session = self.by_head.get(message.head)
        if session is None:
            session = self.by_head[message.head] = self._session(message)
        ts = message.timestamp
        if ts < session.first:
            session.first = ts
        if ts > session.last:
            session.last = ts
        if session.known is not None:
            mark = fingerprint(message.role, ts, message.content, message.name)
            if mark in session.known:
                self.skipped += 1
                return
            session.known.add(mark)
        self.pending.append((session, message))
        if len(self.pending) >= self.chunk_rows:
            self.flush()

    def flush(self) -> None:
        """Write the pending rows as one chunk: one short transaction, indexed inside it."""
        if not self.pending:
            return
        with transaction(self.conn):
            for session, _ in self.pending:
                if session.staged is None:
                    session.staged = self._stage(session)
            last = self.conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
            drop_insert_trigger(self.conn)
            self.conn.executemany(
                _INSERT,
                [(s.staged, m.role, m.content, m.tool_name, m.tool_calls, m.tool_call_id,
                  m.timestamp, m.name) for s, m in self.pending],
            )  # fmt: skip
            index_rows_after(self.conn, last)
            create_insert_trigger(self.conn)
            recount_messages(self.conn, sorted({cast(int, s.staged) for s, _ in self.pending}))
        self.inserted += len(self.pending)
        self.pending.clear()

    def publish(self) -> None:
        """Make every staged row visible at once, in one transaction."""
        self.flush()
        staged = [s for s in self.sessions.values() if s.staged is not None]
        try:
            with transaction(self.conn):
                trigger = _drop_owner_trigger(self.conn)
                for session in staged:
                    _publish_session(self.conn, session)
                self.conn.execute(trigger)
        except sqlite3.IntegrityError:
            raise SessionConflictError(
                "another writer created one of the imported sessions meanwhile; "
                "nothing was imported, run the import again"
            ) from None

    def result(self, lines: int) -> ImportResult:
        created = sum(1 for s in self.sessions.values() if s.existing is None)
        return ImportResult(
            lines=lines,
            sessions_created=created,
            sessions_extended=len(self.sessions) - created,
            messages_inserted=self.inserted,
            messages_skipped=self.skipped,
        )

    def _session(self, message: Message) -> _Session:
        key = message.head[:3]
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = self._find(key, message)
        if session.chat_key != message.head[3:]:
            raise _chat_mismatch(session, message)
        return session

    def _find(self, key: tuple[str, str, str], message: Message) -> _Session:
        ts = message.timestamp
        row = self.conn.execute(NAMED_SESSION.sqlite, key).fetchone()
        own = parse_bot_session_id(key[2])
        if row is None and own is not None:  # exported from a session the bot made here
            row = self.conn.execute(BOT_SESSION.sqlite, (*own, *key[:2])).fetchone()
        if row is None:
            chat_type = cast(ChatType, message.head[4])  # checked by parse_line
            return _Session(*key, message.head[3], chat_type, ts, ts)
        stored = self.conn.execute(*stored_messages(SQLITE, [row[0]]))
        known = {fingerprint(r, t, c, n) for _, r, t, c, n in stored}
        return _Session(*key, row[1], row[2], ts, ts, existing=row[0], known=known)

    def _stage(self, session: _Session) -> int:
        """A hidden session: the real owner token, a staging user key."""
        cursor = self.conn.execute(
            "INSERT INTO sessions(source, user_key, owner_token, chat_id, chat_type, started_at, "
            "ended_at, end_reason, external_id) VALUES (?, ?, ?, ?, ?, ?, ?, 'imported', ?)",
            (
                session.platform,
                self.prefix + session.user,
                owner_token(session.user),
                session.chat,
                session.chat_type,
                session.first,
                session.last,
                session.external_id if session.existing is None else None,
            ),
        )
        staged = int(cursor.lastrowid or 0)
        self.conn.execute(ROOT_ITSELF.sqlite, (staged,))
        return staged


def _drop_owner_trigger(conn: sqlite3.Connection) -> str:
    """Drop the trigger that freezes a session's owner; return the SQL that restores it.

    Publishing changes a staged session's user key from its staging key to the
    real one; the owner token (what the indexes hold) does not change.
    """
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", (_OWNER_TRIGGER,)
    ).fetchone()
    if row is None:
        raise SessionStoreError(f"state.db lacks its {_OWNER_TRIGGER} trigger; run a check")
    conn.execute(f"DROP TRIGGER {_OWNER_TRIGGER}")
    return str(row[0])


def _publish_session(conn: sqlite3.Connection, s: _Session) -> None:
    if s.existing is None:
        conn.execute(
            "UPDATE sessions SET user_key = ?, started_at = ?, ended_at = ? WHERE id = ?",
            (s.user, s.first, s.last, s.staged),
        )
        return
    conn.execute("UPDATE messages SET session_id = ? WHERE session_id = ?", (s.existing, s.staged))
    conn.execute("DELETE FROM sessions WHERE id = ?", (s.staged,))
    conn.execute(EXTENDED_SESSION.sqlite, (s.first, s.first, s.last, s.existing))


def discard_staged(conn: sqlite3.Connection, prefix: str = STAGED_PREFIX) -> int:
    """Delete staged sessions (of one import, or all), in chunks; return the messages deleted."""
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    deleted = 0
    while True:
        with transaction(conn):
            count = conn.execute(
                "DELETE FROM messages WHERE id IN (SELECT m.id FROM sessions s "
                "JOIN messages m ON m.session_id = s.id "
                "WHERE s.user_key >= ? AND s.user_key < ? LIMIT ?)",
                (prefix, end, CHUNK_ROWS),
            ).rowcount
            if count == 0:
                conn.execute(
                    "DELETE FROM sessions WHERE user_key >= ? AND user_key < ?", (prefix, end)
                )
        deleted += count
        if count == 0:
            return deleted


@contextlib.contextmanager
def _cache_size(conn: sqlite3.Connection, kib: int) -> Iterator[None]:
    """This connection's page cache at `kib` KiB for a while (the index builds reread pages)."""
    before = int(conn.execute("PRAGMA cache_size").fetchone()[0])
    conn.execute(f"PRAGMA cache_size = {-abs(kib)}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA cache_size = {before}")


@contextlib.contextmanager
def import_lock(conn: sqlite3.Connection) -> Iterator[None]:
    """Hold ``<database>-import.lock``: one import at a time per database."""
    path = next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")
    if not path:  # an in-memory database: no other process can see it
        yield
        return
    lock = Path(f"{path}-import.lock")
    try:
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
    except OSError as exc:
        raise SessionStoreError(f"cannot open {lock}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SessionStoreBusyError(
                "another import into this database is running; wait for it to finish"
            ) from None
        yield
    finally:
        os.close(fd)


def import_lines(
    conn: sqlite3.Connection,
    lines: Iterable[bytes | str] | IO[bytes],
    *,
    progress: Callable[[int], None] | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> ImportResult:
    """Import JSON Lines (bytes or text, one message each, or a binary file): all or nothing.

    Lines are decoded and checked while this thread writes the previous chunk:
    in a forked process for a large file (see `jsonl.parsed_batches`), else
    on a helper thread. `progress` is called on this thread with the number of
    lines just done. A bad line raises `ImportFormatError` and nothing stays.
    """
    with import_lock(conn), _cache_size(conn, IMPORT_CACHE_KIB):
        discard_staged(conn)  # left by an import that died
        run = _StagedImport(conn, chunk_rows)
        count = 0
        try:
            for batch, consumed in parsed_batches(lines):
                for message in batch:
                    run.add(message)
                count += consumed
                if progress is not None:
                    progress(consumed)
            run.publish()
        except BaseException:
            # Best effort: what stays behind is hidden, and the next import deletes it.
            with contextlib.suppress(SessionStoreError, sqlite3.Error):
                discard_staged(conn, run.prefix)
            raise
    return run.result(count)

"""`SessionDB`: the synchronous session store on one connection.

The command line and the benchmarks use it directly; the async
`SessionStore` runs the same functions on its writer and reader threads. A
`SessionDB` is not thread-safe: use it from one thread at a time.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO

import memory_core.sessions.erase as session_erase
import memory_core.sessions.importer as session_import
import memory_core.sessions.jsonl as jsonl
import memory_core.sessions.reads as session_reads
import memory_core.sessions.writes as session_writes
from memory_core.errors import SessionStoreError
from memory_core.scopes import SearchScope
from memory_core.sessions.connection import (
    ConnectHook,
    connect,
    create_database_file,
    enable_wal,
    set_busy_timeout,
)
from memory_core.sessions.models import (
    DEFAULT_SEARCH_OPTIONS,
    AppendResult,
    CounterUpdate,
    NewMessage,
    ReviewCounters,
    SearchOptions,
    SessionHit,
    SessionInfo,
    SessionOrigin,
    StoredMessage,
)
from memory_core.sessions.schema import check_integrity, migrate
from memory_core.sessions.search import search_sessions
from memory_core.sessions.writes import DeleteResult


def open_writer(
    path: Path, on_connect: ConnectHook | None = None, busy_timeout: float | None = None
) -> sqlite3.Connection:
    """Create the file if needed, switch to WAL, migrate, and return the writer connection.

    Opening waits up to `WRITE_BUSY_TIMEOUT` for the lock (a migration must
    not fail on a passing import); later writes wait `busy_timeout` if given.
    """
    create_database_file(path)
    conn = connect(path, on_connect=on_connect)
    try:
        conn.execute("PRAGMA secure_delete = ON")  # erased history is zeroed on disk
        enable_wal(conn)
        migrate(conn)
        if busy_timeout is not None:
            set_busy_timeout(conn, busy_timeout)
    except BaseException:
        conn.close()
        raise
    return conn


class SessionDB:
    """Session history on a single connection (writes and reads)."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        on_connect: ConnectHook | None = None,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._on_connect = on_connect
        self._conn: sqlite3.Connection | None = None

    def open(self) -> SessionDB:
        if self._conn is None:
            self._conn = open_writer(self.path, self._on_connect)
        return self

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> SessionDB:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise SessionStoreError("the session database is not open")
        return self._conn

    # writes
    def append_message(self, *, origin: SessionOrigin, message: NewMessage) -> AppendResult:
        return session_writes.append_messages(self.conn, origin, [message])

    def append_messages(
        self,
        *,
        origin: SessionOrigin,
        messages: Sequence[NewMessage],
        counters: CounterUpdate | None = None,
    ) -> AppendResult:
        return session_writes.append_messages(self.conn, origin, messages, counters)

    def set_system_prompt(self, session_id: int, prompt: str) -> str:
        return session_writes.set_system_prompt(self.conn, session_id, prompt)

    def end_session(self, session_id: int, reason: str) -> None:
        session_writes.end_session(self.conn, session_id, reason, self._clock())

    def start_child_session(
        self,
        parent_id: int,
        *,
        end_reason: str = "compression",
        model: str | None = None,
        title: str | None = None,
    ) -> int:
        return session_writes.start_child_session(
            self.conn, parent_id, now=self._clock(), end_reason=end_reason, model=model, title=title
        )

    def delete_user(self, user_key: str, *, purge: bool = True) -> DeleteResult:
        return session_writes.delete_user(self.conn, user_key, purge=purge)

    def import_lines(
        self,
        lines: Iterable[bytes | str] | IO[bytes],
        *,
        progress: Callable[[int], None] | None = None,
        chunk_rows: int = session_import.CHUNK_ROWS,
    ) -> jsonl.ImportResult:
        """Import JSON Lines all or nothing, in short transactions (see `importer`)."""
        return session_import.import_lines(
            self.conn, lines, progress=progress, chunk_rows=chunk_rows
        )

    # reads
    def export_lines(self, user_key: str) -> Iterable[str]:
        return jsonl.export_lines(self.conn, user_key)

    def search(
        self, query: str, scope: SearchScope, options: SearchOptions = DEFAULT_SEARCH_OPTIONS
    ) -> list[SessionHit]:
        return search_sessions(self.conn, query, scope, options)

    def get_session(self, session_id: int) -> SessionInfo | None:
        return session_reads.get_session(self.conn, session_id)

    def current_session(self, session_key: str) -> SessionInfo | None:
        return session_reads.current_session(self.conn, session_key)

    def get_messages(
        self, session_id: int, scope: SearchScope, *, lineage: bool = True
    ) -> list[StoredMessage]:
        return session_reads.get_messages(self.conn, session_id, scope, lineage=lineage)

    def list_sessions(self, scope: SearchScope, limit: int = 20) -> list[SessionInfo]:
        return session_reads.list_sessions(self.conn, scope, limit)

    def get_system_prompt(self, session_id: int, scope: SearchScope) -> str | None:
        return session_reads.get_system_prompt(self.conn, session_id, scope)

    def user_totals(self, user_key: str) -> session_erase.UserTotals:
        return session_erase.user_totals(self.conn, user_key)

    def all_user_totals(self) -> list[session_erase.UserTotals]:
        return session_erase.all_user_totals(self.conn)

    def get_counters(self, session_id: int) -> ReviewCounters | None:
        return session_reads.get_counters(self.conn, session_id)

    def check(self, echo: Callable[[str], None] | None = None) -> None:
        check_integrity(self.conn, echo)

"""Opening state.db connections and running write transactions.

Every connection runs in autocommit mode; writes open an explicit
``BEGIN IMMEDIATE`` so that the write lock is taken up front (no deadlock
between two readers upgrading) and a busy database is waited for up to the
busy timeout. The file is created with mode 0600: it holds private
conversations. A write that still finds the database locked after the busy
timeout raises `SessionStoreBusyError`, which the async store retries.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from memory_core.errors import SessionStoreBusyError, SessionStoreError
from memory_core.sessions.schema import register_functions

WRITE_BUSY_TIMEOUT = 30.0  # the command line waits rather than fail
READ_BUSY_TIMEOUT = 5.0
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)

ConnectHook = Callable[[sqlite3.Connection], None]


def create_database_file(path: Path) -> None:
    """Create the folder and an empty database file readable by its owner only."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        os.close(fd)
    except OSError as exc:
        raise SessionStoreError(f"cannot create {path}: {exc.strerror or exc}") from None


def connect(
    path: Path,
    *,
    readonly: bool = False,
    on_connect: ConnectHook | None = None,
    busy_timeout: float | None = None,
) -> sqlite3.Connection:
    """A connection usable from any one thread at a time, in autocommit mode.

    It has the SQL functions the triggers call (`schema.register_functions`).
    """
    if busy_timeout is None:
        busy_timeout = READ_BUSY_TIMEOUT if readonly else WRITE_BUSY_TIMEOUT
    try:
        conn = sqlite3.connect(
            str(path),
            isolation_level=None,
            timeout=busy_timeout,
            check_same_thread=False,
        )
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = NORMAL")
        register_functions(conn)
        if readonly:
            conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error as exc:
        raise SessionStoreError(f"cannot open {path}: {exc}") from None
    if on_connect is not None:
        on_connect(conn)
    return conn


def set_busy_timeout(conn: sqlite3.Connection, seconds: float) -> None:
    """How long one statement waits for a lock before SQLite reports the database busy."""
    conn.execute(f"PRAGMA busy_timeout = {max(0, round(seconds * 1000))}")


def is_busy(exc: BaseException) -> bool:
    """True for errors that mean "locked by someone else, try again later"."""
    if isinstance(exc, SessionStoreBusyError):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None:
            return code & 0xFF in _BUSY_CODES
        return "locked" in str(exc) or "busy" in str(exc)
    return False


def enable_wal(conn: sqlite3.Connection) -> None:
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise SessionStoreError(f"state.db could not switch to WAL mode (got {mode!r})")


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any exception."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise SessionStoreBusyError(f"state.db is busy, try again later ({exc})") from None
        raise SessionStoreError(f"cannot start a write on state.db ({exc})") from None
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def sqlite_problem() -> tuple[str, str | None]:
    """(this Python's SQLite version, what it lacks for history search or None): FTS5,
    and a trigram tokenizer that finds a CJK substring."""
    version = sqlite3.sqlite_version
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE w USING fts5(t, tokenize='unicode61')")
    except sqlite3.OperationalError as exc:
        conn.close()
        return version, f"no FTS5 ({exc})"
    try:
        conn.execute("CREATE VIRTUAL TABLE g USING fts5(t, tokenize='trigram')")
        conn.execute("INSERT INTO g(t) VALUES ('服务器重启')")
        hits = conn.execute("SELECT count(*) FROM g WHERE g MATCH '服务器'").fetchone()[0]
    except sqlite3.OperationalError as exc:
        return version, f"no trigram tokenizer ({exc})"
    finally:
        conn.close()
    if hits != 1:
        return version, f"a trigram search that found {hits} rows, not 1"
    return version, None

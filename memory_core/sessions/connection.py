"""Opening state.db connections and running write transactions.

Every connection runs in autocommit mode; writes open an explicit
``BEGIN IMMEDIATE`` so that the write lock is taken up front (no deadlock
between two readers upgrading) and a busy database is waited for up to the
busy timeout. The file is created with mode 0600: it holds private
conversations.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from memory_core.errors import SessionStoreError

WRITE_BUSY_TIMEOUT = 30.0  # imports hold the write lock for a while; wait rather than fail
READ_BUSY_TIMEOUT = 5.0

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
    path: Path, *, readonly: bool = False, on_connect: ConnectHook | None = None
) -> sqlite3.Connection:
    """A connection usable from any one thread at a time, in autocommit mode."""
    try:
        conn = sqlite3.connect(
            str(path),
            isolation_level=None,
            timeout=READ_BUSY_TIMEOUT if readonly else WRITE_BUSY_TIMEOUT,
            check_same_thread=False,
        )
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = NORMAL")
        if readonly:
            conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error as exc:
        raise SessionStoreError(f"cannot open {path}: {exc}") from None
    if on_connect is not None:
        on_connect(conn)
    return conn


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
        raise SessionStoreError(f"state.db is busy, try again later ({exc})") from None
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")

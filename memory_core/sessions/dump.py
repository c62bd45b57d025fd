"""Every row of state.db as plain tuples, read without writing a byte: the source of a move.

`open_readonly` opens state.db so that nothing on disk changes: a database
closed cleanly (no ``-wal`` file beside it) is opened ``immutable``, which
takes no lock and creates no ``-wal`` or ``-shm`` file; one with a ``-wal``
(a bot running, or one that died) is opened read-only, which reads the
committed rows of the log too and writes only into the files that were
already there. A move is meant to run with the bot stopped.

`table_rows` gives the rows of ``sessions``, ``messages`` or ``inbox`` in id
order, as tuples in the column order of `COLUMNS`, the same order the
PostgreSQL side lists its rows in, so the two can be compared and digested
alike. Flags stored as integers (``extraction_due``, ``own_words``) come out
as 0 or 1 on both.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

from memory_core.errors import SessionStoreError
from memory_core.sessions.connection import READ_BUSY_TIMEOUT, connect
from memory_core.sessions.importer import STAGED_PREFIX
from memory_core.sessions.schema import (
    SCHEMA_VERSION,
    check_integrity,
    register_functions,
    schema_version,
)
from memory_core.sessions.sql.edits import FLAG_COLUMNS, counted_rows, listed_rows

STAGED_END = STAGED_PREFIX[:-1] + chr(ord(STAGED_PREFIX[-1]) + 1)  # above every staging key
# The columns a move carries, per table, in the order both backends list them.
# `owner_token` is not among them: each backend derives it from the user key.
SESSION_COLUMNS = (
    "id", "source", "user_key", "chat_id", "chat_type", "thread_id", "session_key", "title",
    "model", "started_at", "ended_at", "end_reason", "parent_session_id", "root_id",
    "external_id", "message_count", "system_prompt", "turns_since_memory",
    "steps_since_skill", "extracted_through", "extraction_due",
)  # fmt: skip
MESSAGE_COLUMNS = (
    "id", "session_id", "role", "content", "tool_name", "tool_calls", "tool_call_id",
    "timestamp", "platform_message_id", "speaker_name", "dedupe_key", "notice", "own_words",
)  # fmt: skip
INBOX_COLUMNS = ("id", "session_key", "user_key", "source", "payload", "received_at")
COLUMNS: dict[str, tuple[str, ...]] = {
    "sessions": SESSION_COLUMNS,
    "messages": MESSAGE_COLUMNS,
    "inbox": INBOX_COLUMNS,
}
BATCH_ROWS = 2000

# Rows an import left staged when it died are hidden, and deleted by the next
# import: they are not part of the history, so a move leaves them behind.
_STAGED = f"(user_key >= '{STAGED_PREFIX}' AND user_key < '{STAGED_END}')"
_KEPT = {
    "sessions": f"NOT {_STAGED}",
    "messages": f"session_id NOT IN (SELECT id FROM sessions WHERE {_STAGED})",
    "inbox": "TRUE",
}


def open_readonly(path: Path) -> sqlite3.Connection:
    """state.db opened so that no file of the data directory changes (see above)."""
    path = Path(path)
    if not path.is_file():
        raise SessionStoreError(f"{path} does not exist")
    mode = "mode=ro" if Path(f"{path}-wal").exists() else "immutable=1"
    uri = f"file:{quote(str(path.resolve()))}?{mode}"
    try:
        conn = sqlite3.connect(
            uri, uri=True, isolation_level=None, timeout=READ_BUSY_TIMEOUT, check_same_thread=False
        )
        conn.execute("PRAGMA query_only = ON")
        register_functions(conn)  # the views the integrity check reads call them
        version = schema_version(conn)
    except sqlite3.Error as exc:
        raise SessionStoreError(f"cannot read {path}: {exc}") from None
    if version != SCHEMA_VERSION:
        conn.close()
        raise SessionStoreError(
            f"{path} has schema version {version}, not {SCHEMA_VERSION}: open it once with "
            "this Mnemo (mnemo sessions check) before moving it"
        )
    return conn


def table_rows(conn: sqlite3.Connection, table: str) -> Iterator[tuple[object, ...]]:
    """Every row of `table` in id order, as tuples of `COLUMNS[table]`."""
    flags = FLAG_COLUMNS.get(table, ())
    cursor = conn.execute(listed_rows(table, COLUMNS[table], flags, _KEPT[table]))
    while rows := cursor.fetchmany(BATCH_ROWS):
        yield from rows


def row_count(conn: sqlite3.Connection, table: str) -> int:
    """How many rows of `table` a move carries."""
    where = _KEPT[table]  # a KeyError for any other name
    return int(conn.execute(counted_rows(table, where)).fetchone()[0])


def check_source(path: Path, echo: Callable[[str], None] | None = None) -> None:
    """SQLite's integrity check, FTS5's on both indexes, the counts and the version.

    FTS5 runs its check only on a writable connection (it writes nothing), so
    this one is not read-only; it does not migrate. Raises `IndexIntegrityError`.
    """
    if not Path(path).is_file():
        raise SessionStoreError(f"{path} does not exist")
    conn = connect(Path(path))
    try:
        check_integrity(conn, echo)
    finally:
        conn.close()

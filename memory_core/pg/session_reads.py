"""Reads of the PostgreSQL session store: SQLite's `reads`, `chats.unanswered`,
`inbox.waiting`, `backlog`, `activity`, `erase` and `jsonl.export_lines`
statements in PostgreSQL's SQL, returning the same values.

Each function takes an autocommit connection and runs one statement, most of them
written once for both stores in `memory_core.sessions.sql.reads`. Reads that return
message or prompt text check a `SearchScope` in SQL (`memory_core.sessions.sql.scope_sql`),
so a session id alone never opens another person's conversation. User keys sort byte
by byte (``COLLATE "C"``), as SQLite sorts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_core.pg.database import Connection
from memory_core.scopes import SearchScope
from memory_core.sessions.activity import SessionActivity
from memory_core.sessions.backlog import backlog_entry
from memory_core.sessions.erase import UserTotals
from memory_core.sessions.inbox import QueuedMessage
from memory_core.sessions.jsonl import export_line
from memory_core.sessions.locks import SessionMark
from memory_core.sessions.models import (
    BacklogEntry,
    ReviewCounters,
    ReviewDue,
    SearchOptions,
    SessionInfo,
    StoredMessage,
)
from memory_core.sessions.reads import session_mark_of, stored_message
from memory_core.sessions.sql import POSTGRES
from memory_core.sessions.sql import reads as sql
from memory_core.sessions.sql.reads import MESSAGE_COLUMNS, S_SESSION_COLUMNS, SESSION_WIDTH


async def _all(conn: Connection, text: str, params: Sequence[object] = ()) -> list[Any]:
    return await (await conn.execute(text.encode(), params)).fetchall()


async def _one(conn: Connection, text: str, params: Sequence[object] = ()) -> Any:
    return await (await conn.execute(text.encode(), params)).fetchone()


def _session(row: Sequence[Any] | None) -> SessionInfo | None:
    return None if row is None else SessionInfo(*row)


async def get_session(conn: Connection, session_id: int) -> SessionInfo | None:
    return _session(await _one(conn, sql.GET_SESSION.postgres, (session_id,)))


async def current_session(conn: Connection, session_key: str) -> SessionInfo | None:
    return _session(await _one(conn, sql.CURRENT_SESSION.postgres, (session_key,)))


async def session_mark(conn: Connection, session_key: str) -> SessionMark | None:
    return session_mark_of(await _one(conn, sql.SESSION_MARK.postgres, (session_key,)))


async def get_system_prompt(conn: Connection, session_id: int, scope: SearchScope) -> str | None:
    row = await _one(conn, *sql.system_prompt(POSTGRES, session_id, scope))
    return None if row is None or row[0] is None else str(row[0])


async def get_counters(conn: Connection, session_id: int) -> ReviewCounters | None:
    row = await _one(conn, sql.COUNTERS.postgres, (session_id,))
    return None if row is None else ReviewCounters(int(row[0]), int(row[1]))


async def get_messages(
    conn: Connection, session_id: int, scope: SearchScope, *, lineage: bool = True
) -> list[StoredMessage]:
    rows = await _all(conn, *sql.messages(POSTGRES, session_id, scope, lineage=lineage))
    return [stored_message(row) for row in rows]


async def list_sessions(conn: Connection, scope: SearchScope, limit: int = 20) -> list[SessionInfo]:
    rows = await _all(conn, *sql.root_sessions(POSTGRES, scope, limit))
    return [SessionInfo(*row) for row in rows]


async def unanswered(
    conn: Connection,
    source: str,
    since: float,
    limit: int = 100,
    session_key: str | None = None,
) -> list[tuple[SessionInfo, StoredMessage]]:
    """`chats.unanswered`: every person's message of the open sessions (of `session_key`,
    if given) not answered yet. A statement of each backend's: SQLite's names its partial
    index (``INDEXED BY``), PostgreSQL's plans with its own (``WHERE unanswered``)."""
    one = "" if session_key is None else "AND s.session_key = %s "
    rows = await _all(
        conn,
        f"SELECT {S_SESSION_COLUMNS}, {MESSAGE_COLUMNS} FROM messages m "
        "JOIN sessions s ON s.id = m.session_id "
        "WHERE m.unanswered AND s.ended_at IS NULL AND s.source = %s "
        f"AND m.timestamp >= %s {one}ORDER BY m.timestamp, m.id LIMIT %s",
        (source, since, *(() if session_key is None else (session_key,)), limit),
    )
    return [
        (SessionInfo(*row[:SESSION_WIDTH]), stored_message(row[SESSION_WIDTH:])) for row in rows
    ]


async def queued_messages(conn: Connection, source: str, limit: int = 1000) -> list[QueuedMessage]:
    rows = await _all(conn, sql.QUEUED_OF_SOURCE.postgres, (source, limit))
    return [QueuedMessage(*row) for row in rows]


async def queued_for(conn: Connection, session_key: str, limit: int = 1000) -> list[QueuedMessage]:
    """`inbox.for_session`: one session's waiting messages, by the `inbox_session` index."""
    rows = await _all(conn, sql.QUEUED_OF_SESSION.postgres, (session_key, limit))
    return [QueuedMessage(*row) for row in rows]


async def extraction_progress(conn: Connection, session_id: int) -> int | None:
    row = await _one(conn, sql.EXTRACTION_PROGRESS.postgres, (session_id,))
    return None if row is None else int(row[0])


async def pending_extractions(conn: Connection, limit: int = 100) -> list[BacklogEntry]:
    """`backlog.pending_extractions`: ended sessions due, the longest-ended first."""
    rows = await _all(conn, *sql.pending_extractions(POSTGRES, limit))
    return [backlog_entry(row) for row in rows]


async def quiet_sessions(conn: Connection, before: float, limit: int = 100) -> list[BacklogEntry]:
    """`backlog.quiet_sessions`: open sessions quiet since `before`, not yet extracted."""
    rows = await _all(conn, *sql.quiet_sessions(POSTGRES, before, limit))
    return [backlog_entry(row) for row in rows]


async def reviews_due(
    conn: Connection, turns: int, steps: int, limit: int = 100
) -> list[ReviewDue]:
    """`backlog.reviews_due`: open sessions whose counters reached `turns` or `steps`."""
    rows = await _all(conn, *sql.reviews_due(POSTGRES, turns, steps, limit))
    return [ReviewDue(int(r[0]), r[1], str(r[2]), int(r[3]), int(r[4])) for r in rows]


async def active_sessions(
    conn: Connection, scope: SearchScope, options: SearchOptions
) -> tuple[list[SessionActivity], int]:
    """`activity.active_sessions`: conversations with messages in the window, latest first."""
    rows = await _all(conn, *sql.active_sessions(POSTGRES, scope, options))
    total = int(rows[0][-1]) if rows else 0
    return [SessionActivity(*row[:-1]) for row in rows], total


async def user_totals(conn: Connection, user_key: str) -> UserTotals:
    row = await _one(conn, sql.USER_TOTALS.postgres, (user_key,))
    return UserTotals(user_key, int(row[0]), int(row[1]))


async def all_user_totals(conn: Connection) -> list[UserTotals]:
    rows = await _all(conn, sql.all_user_totals(POSTGRES))
    return [UserTotals(str(key), int(sessions), int(messages)) for key, sessions, messages in rows]


async def user_session_keys(conn: Connection, user_key: str) -> list[str]:
    rows = await _all(conn, sql.USER_SESSION_KEYS.postgres, (user_key,))
    return sorted(str(key) for (key,) in rows)


async def export_lines(conn: Connection, user_key: str) -> list[str]:
    """`jsonl.export_lines`: every message of the person as import-format JSON lines."""
    rows = await _all(conn, sql.EXPORT.postgres, (user_key,))
    return [export_line(row) for row in rows]

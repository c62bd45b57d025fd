"""Reads of the PostgreSQL session store: SQLite's `reads`, `chats.unanswered`,
`inbox.waiting`, `backlog`, `activity`, `erase` and `jsonl.export_lines`
statements in PostgreSQL's SQL, returning the same values.

Each function takes an autocommit connection and runs one statement. Reads
that return message or prompt text check a `SearchScope` in SQL
(`memory_core.sessions.sql.scope_sql`), so a session id alone never opens another person's
conversation. User keys sort byte by byte (``COLLATE "C"``), as SQLite sorts.
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
from memory_core.sessions.jsonl import EXPORT_COLUMNS, EXPORT_ORDER, export_line
from memory_core.sessions.locks import SessionMark
from memory_core.sessions.models import (
    INTERNAL_SOURCES,
    BacklogEntry,
    ReviewCounters,
    ReviewDue,
    SearchOptions,
    SessionInfo,
    StoredMessage,
)
from memory_core.sessions.reads import SESSION_COLUMNS, stored_message
from memory_core.sessions.sql import POSTGRES, ScopeFilter, scope_sql

MESSAGE_COLUMNS = (
    "m.id, m.session_id, m.role, m.content, m.timestamp, m.tool_name, m.tool_calls, "
    "m.tool_call_id, m.platform_message_id, m.speaker_name, m.own_words"
)
_S_COLUMNS = ", ".join(f"s.{c.strip()}" for c in SESSION_COLUMNS.split(","))
_WIDTH = len(SESSION_COLUMNS.split(","))


async def _all(conn: Connection, sql: str, params: Sequence[object] = ()) -> list[Any]:
    return await (await conn.execute(sql.encode(), params)).fetchall()


async def _one(conn: Connection, sql: str, params: Sequence[object] = ()) -> Any:
    return await (await conn.execute(sql.encode(), params)).fetchone()


def _session(row: Sequence[Any] | None) -> SessionInfo | None:
    return None if row is None else SessionInfo(*row)


async def get_session(conn: Connection, session_id: int) -> SessionInfo | None:
    sql = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = %s"
    return _session(await _one(conn, sql, (session_id,)))


async def current_session(conn: Connection, session_key: str) -> SessionInfo | None:
    sql = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_key = %s AND ended_at IS NULL"
    return _session(await _one(conn, sql, (session_key,)))


async def session_mark(conn: Connection, session_key: str) -> SessionMark | None:
    row = await _one(
        conn,
        "SELECT s.id, (SELECT max(m.id) FROM messages m WHERE m.session_id = s.id), "
        "char_length(s.system_prompt) FROM sessions s "
        "WHERE s.session_key = %s AND s.ended_at IS NULL",
        (session_key,),
    )
    if row is None:
        return None
    return SessionMark(int(row[0]), int(row[1] or 0), None if row[2] is None else int(row[2]))


async def get_system_prompt(conn: Connection, session_id: int, scope: SearchScope) -> str | None:
    where, params = scope_sql(POSTGRES, scope)
    row = await _one(
        conn,
        f"SELECT s.system_prompt FROM sessions s WHERE s.id = %s AND {where}",
        (session_id, *params),
    )
    return None if row is None or row[0] is None else str(row[0])


async def get_counters(conn: Connection, session_id: int) -> ReviewCounters | None:
    row = await _one(
        conn,
        "SELECT turns_since_memory, steps_since_skill FROM sessions WHERE id = %s",
        (session_id,),
    )
    return None if row is None else ReviewCounters(int(row[0]), int(row[1]))


async def get_messages(
    conn: Connection, session_id: int, scope: SearchScope, *, lineage: bool = True
) -> list[StoredMessage]:
    where, params = scope_sql(POSTGRES, scope)
    target = (
        "s.root_id = (SELECT x.root_id FROM sessions x WHERE x.id = %s)" if lineage else "s.id = %s"
    )
    rows = await _all(
        conn,
        f"SELECT {MESSAGE_COLUMNS} FROM messages m JOIN sessions s ON s.id = m.session_id "
        f"WHERE {target} AND {where} ORDER BY m.timestamp, m.id",
        (session_id, *params),
    )
    return [stored_message(row) for row in rows]


async def list_sessions(conn: Connection, scope: SearchScope, limit: int = 20) -> list[SessionInfo]:
    where, params = scope_sql(POSTGRES, scope)
    rows = await _all(
        conn,
        f"SELECT {_S_COLUMNS} FROM sessions s WHERE {where} AND s.id = s.root_id "
        "ORDER BY s.started_at DESC, s.id DESC LIMIT %s",
        (*params, max(1, limit)),
    )
    return [SessionInfo(*row) for row in rows]


async def unanswered(
    conn: Connection,
    source: str,
    since: float,
    limit: int = 100,
    session_key: str | None = None,
) -> list[tuple[SessionInfo, StoredMessage]]:
    """`chats.unanswered`: every person's message of the open sessions (of `session_key`,
    if given) not answered yet."""
    one = "" if session_key is None else "AND s.session_key = %s "
    rows = await _all(
        conn,
        f"SELECT {_S_COLUMNS}, {MESSAGE_COLUMNS} FROM messages m "
        "JOIN sessions s ON s.id = m.session_id "
        "WHERE m.unanswered AND s.ended_at IS NULL AND s.source = %s "
        f"AND m.timestamp >= %s {one}ORDER BY m.timestamp, m.id LIMIT %s",
        (source, since, *(() if session_key is None else (session_key,)), limit),
    )
    return [(SessionInfo(*row[:_WIDTH]), stored_message(row[_WIDTH:])) for row in rows]


async def queued_messages(conn: Connection, source: str, limit: int = 1000) -> list[QueuedMessage]:
    rows = await _all(
        conn,
        "SELECT id, session_key, user_key, source, payload, received_at FROM inbox "
        "WHERE source = %s ORDER BY id LIMIT %s",
        (source, limit),
    )
    return [QueuedMessage(*row) for row in rows]


async def queued_for(conn: Connection, session_key: str, limit: int = 1000) -> list[QueuedMessage]:
    """`inbox.for_session`: one session's waiting messages, by the `inbox_session` index."""
    rows = await _all(
        conn,
        "SELECT id, session_key, user_key, source, payload, received_at FROM inbox "
        "WHERE session_key = %s ORDER BY id LIMIT %s",
        (session_key, limit),
    )
    return [QueuedMessage(*row) for row in rows]


# One row per session with its newest message and what is left to extract
# (`backlog._ENTRIES`); `{where}` picks the sessions, `{order}` sorts them.
_ENTRIES = """
SELECT * FROM (
    SELECT s.id, s.session_key, s.user_key, s.chat_id, s.chat_type, s.thread_id, s.source,
        s.ended_at, s.end_reason, s.extracted_through,
        (SELECT max(m.id) FROM messages m WHERE m.session_id = s.id) AS last_id,
        (SELECT max(m.timestamp) FROM messages m WHERE m.session_id = s.id) AS last_at,
        (SELECT count(*) FROM messages m WHERE m.session_id = s.id
            AND m.id > s.extracted_through) AS pending
    FROM sessions s WHERE {where}
) AS e WHERE {having} ORDER BY {order} LIMIT %s
"""


async def extraction_progress(conn: Connection, session_id: int) -> int | None:
    row = await _one(conn, "SELECT extracted_through FROM sessions WHERE id = %s", (session_id,))
    return None if row is None else int(row[0])


async def pending_extractions(conn: Connection, limit: int = 100) -> list[BacklogEntry]:
    """`backlog.pending_extractions`: ended sessions due, the longest-ended first."""
    sql = _ENTRIES.format(
        where="s.extraction_due AND s.ended_at IS NOT NULL", having="TRUE", order="ended_at, id"
    )
    return [backlog_entry(row) for row in await _all(conn, sql, (max(1, limit),))]


async def quiet_sessions(conn: Connection, before: float, limit: int = 100) -> list[BacklogEntry]:
    """`backlog.quiet_sessions`: open sessions quiet since `before`, not yet extracted."""
    sql = _ENTRIES.format(
        where="s.ended_at IS NULL AND s.external_id IS NULL AND s.source <> ALL(%s)",
        having="last_at < %s AND last_id > extracted_through",
        order="last_at, id",
    )
    rows = await _all(conn, sql, (list(INTERNAL_SOURCES), float(before), max(1, limit)))
    return [backlog_entry(row) for row in rows]


async def reviews_due(
    conn: Connection, turns: int, steps: int, limit: int = 100
) -> list[ReviewDue]:
    """`backlog.reviews_due`: open sessions whose counters reached `turns` or `steps`."""
    rows = await _all(
        conn,
        "SELECT id, session_key, user_key, turns_since_memory, steps_since_skill "
        "FROM sessions WHERE ended_at IS NULL AND source <> ALL(%s) "
        "AND ((%s > 0 AND turns_since_memory >= %s) OR (%s > 0 AND steps_since_skill >= %s)) "
        "ORDER BY id LIMIT %s",
        (list(INTERNAL_SOURCES), turns, turns, steps, steps, max(1, limit)),
    )
    return [ReviewDue(int(r[0]), r[1], str(r[2]), int(r[3]), int(r[4])) for r in rows]


async def active_sessions(
    conn: Connection, scope: SearchScope, options: SearchOptions
) -> tuple[list[SessionActivity], int]:
    """`activity.active_sessions`: conversations with messages in the window, latest first."""
    where = ScopeFilter.build(POSTGRES, scope, options)
    rows = await _all(
        conn,
        "SELECT r.id, r.source, r.chat_type, r.started_at, min(m.timestamp), "
        "max(m.timestamp), count(*), count(*) OVER () "
        "FROM messages m JOIN sessions s ON s.id = m.session_id "
        "JOIN sessions r ON r.id = s.root_id "
        f"WHERE {where.sql} AND m.role IN ('user', 'assistant') "
        "GROUP BY r.id ORDER BY max(m.timestamp) DESC, r.id DESC LIMIT %s",
        (*where.params, max(1, options.limit)),
    )
    total = int(rows[0][-1]) if rows else 0
    return [SessionActivity(*row[:-1]) for row in rows], total


async def user_totals(conn: Connection, user_key: str) -> UserTotals:
    row = await _one(
        conn,
        "SELECT count(DISTINCT s.id), count(m.id) FROM sessions s "
        "LEFT JOIN messages m ON m.session_id = s.id WHERE s.user_key = %s",
        (user_key,),
    )
    return UserTotals(user_key, int(row[0]), int(row[1]))


async def all_user_totals(conn: Connection) -> list[UserTotals]:
    rows = await _all(
        conn,
        "SELECT s.user_key, count(DISTINCT s.id), count(m.id) FROM sessions s "
        "LEFT JOIN messages m ON m.session_id = s.id "
        'GROUP BY s.user_key ORDER BY s.user_key COLLATE "C"',
    )
    return [UserTotals(str(key), int(sessions), int(messages)) for key, sessions, messages in rows]


async def user_session_keys(conn: Connection, user_key: str) -> list[str]:
    rows = await _all(
        conn,
        "SELECT DISTINCT session_key FROM sessions WHERE user_key = %s AND session_key IS NOT NULL",
        (user_key,),
    )
    return sorted(str(key) for (key,) in rows)


async def export_lines(conn: Connection, user_key: str) -> list[str]:
    """`jsonl.export_lines`: every message of the person as import-format JSON lines."""
    rows = await _all(
        conn,
        f"SELECT {EXPORT_COLUMNS} FROM sessions s JOIN messages m ON m.session_id = s.id "
        f"WHERE s.user_key = %s ORDER BY {EXPORT_ORDER}",
        (user_key,),
    )
    return [export_line(row) for row in rows]

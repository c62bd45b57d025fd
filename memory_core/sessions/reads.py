"""Plain reads of state.db: sessions by id or key, a conversation's messages, and
what a session resumes with (its stored system prompt and review counters).

Reads that return message or prompt text take a `SearchScope` and check it in SQL, so a
session id alone never opens another person's conversation.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from memory_core.scopes import SearchScope
from memory_core.sessions.locks import SessionMark
from memory_core.sessions.models import ReviewCounters, SessionInfo, StoredMessage
from memory_core.sessions.sql import SQLITE, scope_sql

SESSION_COLUMNS = (
    "id, source, user_key, chat_id, chat_type, thread_id, session_key, title, model, "
    "started_at, ended_at, end_reason, parent_session_id, root_id, external_id"
)
MESSAGE_COLUMNS = (
    "m.id, m.session_id, m.role, m.content, m.timestamp, m.tool_name, m.tool_calls, "
    "m.tool_call_id, m.platform_message_id, m.speaker_name, m.own_words = 1"
)


def stored_message(row: Sequence[Any]) -> StoredMessage:
    """A message row read with `MESSAGE_COLUMNS`."""
    *fields, own_words = row
    return replace(StoredMessage(*fields), own_words=bool(own_words))


def _session(row: tuple[Any, ...] | None) -> SessionInfo | None:
    return None if row is None else SessionInfo(*row)


def get_session(conn: sqlite3.Connection, session_id: int) -> SessionInfo | None:
    """The session row with this id, or None."""
    row = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
    return _session(row.fetchone())


def current_session(conn: sqlite3.Connection, session_key: str) -> SessionInfo | None:
    """The open session of a routing key, or None when the next message starts one."""
    row = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_key = ? AND ended_at IS NULL",
        (session_key,),
    )
    return _session(row.fetchone())


def session_mark(conn: sqlite3.Connection, session_key: str) -> SessionMark | None:
    """The open session of a routing key as `SessionMark` (None: no open session)."""
    row = conn.execute(
        "SELECT s.id, (SELECT max(m.id) FROM messages m WHERE m.session_id = s.id), "
        "length(s.system_prompt) FROM sessions s WHERE s.session_key = ? AND s.ended_at IS NULL",
        (session_key,),
    ).fetchone()
    if row is None:
        return None
    return SessionMark(int(row[0]), int(row[1] or 0), None if row[2] is None else int(row[2]))


def get_system_prompt(conn: sqlite3.Connection, session_id: int, scope: SearchScope) -> str | None:
    """The system prompt stored with a session in `scope`, or None (none stored, or no
    such session in scope)."""
    where, params = scope_sql(SQLITE, scope)
    row = conn.execute(
        f"SELECT s.system_prompt FROM sessions s WHERE s.id = ? AND {where}",
        (session_id, *params),
    ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def get_counters(conn: sqlite3.Connection, session_id: int) -> ReviewCounters | None:
    """The review counters of a session, or None when there is no such session."""
    row = conn.execute(
        "SELECT turns_since_memory, steps_since_skill FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    return None if row is None else ReviewCounters(int(row[0]), int(row[1]))


def get_messages(
    conn: sqlite3.Connection, session_id: int, scope: SearchScope, *, lineage: bool = True
) -> list[StoredMessage]:
    """The messages of a session (and, with `lineage`, of its whole lineage), in order.

    Empty when the session does not exist or lies outside `scope`.
    """
    where, params = scope_sql(SQLITE, scope)
    target = "s.root_id = (SELECT root_id FROM sessions WHERE id = ?)" if lineage else "s.id = ?"
    rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m JOIN sessions s ON s.id = m.session_id "
        f"WHERE {target} AND {where} ORDER BY m.timestamp, m.id",
        (session_id, *params),
    )
    return [stored_message(row) for row in rows]


def list_sessions(
    conn: sqlite3.Connection, scope: SearchScope, limit: int = 20
) -> list[SessionInfo]:
    """The most recent root sessions in scope, newest first."""
    where, params = scope_sql(SQLITE, scope)
    rows = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE {where} AND s.id = s.root_id "
        "ORDER BY s.started_at DESC, s.id DESC LIMIT ?",
        (*params, max(1, limit)),
    )
    return [SessionInfo(*row) for row in rows]

"""Plain reads of state.db: sessions by id or key, a conversation's messages, and
what a session resumes with (its stored system prompt and review counters).

Reads that return message or prompt text take a `SearchScope` and check it in SQL, so a
session id alone never opens another person's conversation. The statements are
`memory_core.sessions.sql.reads`, shared with PostgreSQL's store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from memory_core.scopes import SearchScope
from memory_core.sessions.locks import SessionMark
from memory_core.sessions.models import ReviewCounters, SessionInfo, StoredMessage
from memory_core.sessions.sql import SQLITE
from memory_core.sessions.sql import reads as sql


def stored_message(row: Sequence[Any]) -> StoredMessage:
    """A message row read with `sql.reads.MESSAGE_COLUMNS` (either backend)."""
    *fields, own_words = row
    return replace(StoredMessage(*fields), own_words=bool(own_words))


def session_mark_of(row: Sequence[Any] | None) -> SessionMark | None:
    """A row of `sql.reads.SESSION_MARK` (either backend) as a `SessionMark`."""
    if row is None:
        return None
    return SessionMark(int(row[0]), int(row[1] or 0), None if row[2] is None else int(row[2]))


def _session(row: tuple[Any, ...] | None) -> SessionInfo | None:
    return None if row is None else SessionInfo(*row)


def get_session(conn: sqlite3.Connection, session_id: int) -> SessionInfo | None:
    """The session row with this id, or None."""
    return _session(conn.execute(sql.GET_SESSION.sqlite, (session_id,)).fetchone())


def current_session(conn: sqlite3.Connection, session_key: str) -> SessionInfo | None:
    """The open session of a routing key, or None when the next message starts one."""
    return _session(conn.execute(sql.CURRENT_SESSION.sqlite, (session_key,)).fetchone())


def session_mark(conn: sqlite3.Connection, session_key: str) -> SessionMark | None:
    """The open session of a routing key as `SessionMark` (None: no open session)."""
    return session_mark_of(conn.execute(sql.SESSION_MARK.sqlite, (session_key,)).fetchone())


def get_system_prompt(conn: sqlite3.Connection, session_id: int, scope: SearchScope) -> str | None:
    """The system prompt stored with a session in `scope`, or None (none stored, or no
    such session in scope)."""
    row = conn.execute(*sql.system_prompt(SQLITE, session_id, scope)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def get_counters(conn: sqlite3.Connection, session_id: int) -> ReviewCounters | None:
    """The review counters of a session, or None when there is no such session."""
    row = conn.execute(sql.COUNTERS.sqlite, (session_id,)).fetchone()
    return None if row is None else ReviewCounters(int(row[0]), int(row[1]))


def get_messages(
    conn: sqlite3.Connection, session_id: int, scope: SearchScope, *, lineage: bool = True
) -> list[StoredMessage]:
    """The messages of a session (and, with `lineage`, of its whole lineage), in order.

    Empty when the session does not exist or lies outside `scope`.
    """
    rows = conn.execute(*sql.messages(SQLITE, session_id, scope, lineage=lineage))
    return [stored_message(row) for row in rows]


def list_sessions(
    conn: sqlite3.Connection, scope: SearchScope, limit: int = 20
) -> list[SessionInfo]:
    """The most recent root sessions in scope, newest first."""
    return [SessionInfo(*row) for row in conn.execute(*sql.root_sessions(SQLITE, scope, limit))]

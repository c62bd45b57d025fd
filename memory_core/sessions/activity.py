"""Which conversations of a scope were active in a time window (`/recall last week`).

The same `ScopeFilter` the search builds (scope, internal sources, the lineage
left out, the window on message times) confines the read, so a listing shows
exactly the conversations a search of that window could find. A conversation
is a lineage, named by its root session; it is active in the window when one
of its person's or assistant's messages falls inside it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from memory_core.scopes import ChatType, SearchScope
from memory_core.sessions.models import SearchOptions
from memory_core.sessions.sql import SQLITE
from memory_core.sessions.sql.reads import active_sessions as active_sql


@dataclass(frozen=True)
class SessionActivity:
    """One conversation active in a window: its root session, and its messages there."""

    session_id: int  # the lineage's root
    source: str
    chat_type: ChatType
    started_at: float  # when the conversation began (maybe before the window)
    first_at: float  # its first message inside the window
    last_at: float  # its last message inside the window
    messages: int  # how many of its messages lie inside the window


def active_sessions(
    conn: sqlite3.Connection, scope: SearchScope, options: SearchOptions
) -> tuple[list[SessionActivity], int]:
    """The conversations of `scope` with messages in the options' window, the latest
    active first, at most `options.limit` of them, and how many there are in all."""
    rows = conn.execute(*active_sql(SQLITE, scope, options)).fetchall()
    total = int(rows[0][-1]) if rows else 0
    return [SessionActivity(*row[:-1]) for row in rows], total

"""Counting what the session store holds about people (for erasure and `mnemo users`)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from memory_core.sessions.sql import SQLITE
from memory_core.sessions.sql import reads as sql


@dataclass(frozen=True)
class UserTotals:
    """How many sessions and messages one person has in state.db."""

    user_key: str
    sessions: int
    messages: int


def user_totals(conn: sqlite3.Connection, user_key: str) -> UserTotals:
    """`user_key`'s sessions and messages (zero for a person the store never saw)."""
    sessions, messages = conn.execute(sql.USER_TOTALS.sqlite, (user_key,)).fetchone()
    return UserTotals(user_key, int(sessions), int(messages))


def all_user_totals(conn: sqlite3.Connection) -> list[UserTotals]:
    """Every person with a session, by user key."""
    rows = conn.execute(sql.all_user_totals(SQLITE)).fetchall()
    return [UserTotals(str(key), int(sessions), int(messages)) for key, sessions, messages in rows]


def user_session_keys(conn: sqlite3.Connection, user_key: str) -> list[str]:
    """The routing keys of `user_key`'s sessions (to drop the ones a bot holds open)."""
    rows = conn.execute(sql.USER_SESSION_KEYS.sqlite, (user_key,)).fetchall()
    return sorted(str(key) for (key,) in rows)

"""Messages waiting for their session: durable, in order, until their turn stores them.

A message that arrives while its session is busy (the previous reply is still
being written) is kept here first, so the platform can be told it arrived
without waiting for that reply; its turn then stores it in `messages` and
drops it from here. Anything left after a stop is answered at the next start.
The payload is the application's own serialised message; this module keeps
it as text and never reads it. Erasing a person removes theirs too.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from memory_core.sessions.connection import transaction
from memory_core.sessions.sql.reads import QUEUED_OF_SESSION, QUEUED_OF_SOURCE
from memory_core.sessions.sql.writes import DROP_QUEUED, QUEUE


@dataclass(frozen=True)
class QueuedMessage:
    """One waiting message: its queue id, where it goes, and the payload as given."""

    id: int
    session_key: str
    user_key: str
    source: str
    payload: str
    received_at: float


def queue(
    conn: sqlite3.Connection,
    session_key: str,
    user_key: str,
    source: str,
    payload: str,
    now: float,
) -> int:
    """Keep one message for its session; its queue id."""
    with transaction(conn):
        cursor = conn.execute(QUEUE.sqlite, (session_key, user_key, source, payload, now))
    return int(cursor.lastrowid or 0)


def drop(conn: sqlite3.Connection, queue_id: int) -> None:
    """Forget a waiting message once its turn stored it (a missing one is fine)."""
    with transaction(conn):
        conn.execute(DROP_QUEUED.sqlite, (queue_id,))


def waiting(conn: sqlite3.Connection, source: str, limit: int = 1000) -> list[QueuedMessage]:
    """The messages of `source` still waiting, in the order they arrived."""
    rows = conn.execute(QUEUED_OF_SOURCE.sqlite, (source, limit)).fetchall()
    return [QueuedMessage(*row) for row in rows]


def for_session(
    conn: sqlite3.Connection, session_key: str, limit: int = 1000
) -> list[QueuedMessage]:
    """The messages of `session_key` still waiting, in the order they arrived (by the
    `inbox_session` index: the other sessions' messages are not read)."""
    rows = conn.execute(QUEUED_OF_SESSION.sqlite, (session_key, limit)).fetchall()
    return [QueuedMessage(*row) for row in rows]

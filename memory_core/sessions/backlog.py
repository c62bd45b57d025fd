"""The background work state.db holds: how far extraction got, what is due.

Per session the store keeps `extracted_through` (the id of the last message
the extraction agent covered) and `extraction_due` (the session ended and its
session-end extraction has not finished). Ending a session with messages past
`extracted_through` makes it due (see `writes.end_session`); `mark_extracted`
moves the mark forward and, when finished, clears it. So a process killed
mid-extraction loses nothing: the next start finds the same backlog.

Imported sessions and the background agents' own sessions (review,
extraction) are never in the backlog. The queries below touch only the due
or the open sessions (partial indexes) and each one's messages through the
``messages_session`` index, never a scan of all messages.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from memory_core.sessions.connection import transaction
from memory_core.sessions.models import INTERNAL_SOURCES, BacklogEntry, ReviewDue

_NOT_INTERNAL = f"source NOT IN ({', '.join(repr(s) for s in INTERNAL_SOURCES)})"

# One row per session with its newest message and what is left to extract;
# `{where}` picks the sessions, `{order}` sorts them.
_ENTRIES = """
SELECT * FROM (
    SELECT s.id, s.session_key, s.user_key, s.chat_id, s.chat_type, s.thread_id, s.source,
        s.ended_at, s.end_reason, s.extracted_through,
        (SELECT max(m.id) FROM messages m WHERE m.session_id = s.id) AS last_id,
        (SELECT max(m.timestamp) FROM messages m WHERE m.session_id = s.id) AS last_at,
        (SELECT count(*) FROM messages m WHERE m.session_id = s.id AND m.id > s.extracted_through)
    FROM sessions s WHERE {where}
) WHERE {having} ORDER BY {order} LIMIT ?
"""


def backlog_entry(row: Sequence[Any]) -> BacklogEntry:
    """A backlog row (the columns of the backlog query, on either backend) as an entry."""
    last_at = row[11] if row[11] is not None else (row[7] or 0.0)
    return BacklogEntry(
        session_id=int(row[0]),
        session_key=row[1],
        user_key=str(row[2]),
        chat_id=str(row[3]),
        chat_type=row[4],
        thread_id=row[5],
        source=str(row[6]),
        ended_at=row[7],
        end_reason=row[8],
        extracted_through=int(row[9]),
        last_message_id=int(row[10] or 0),
        last_message_at=float(last_at),
        pending_messages=int(row[12]),
    )


def extraction_progress(conn: sqlite3.Connection, session_id: int) -> int | None:
    """The id of the last message extracted from a session (0: none); None: no such session."""
    row = conn.execute(
        "SELECT extracted_through FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    return None if row is None else int(row[0])


def mark_extracted(
    conn: sqlite3.Connection, session_id: int, through_message_id: int, *, finished: bool
) -> None:
    """Record that extraction covered a session up to `through_message_id`.

    The mark only moves forward, so a late or repeated call changes nothing;
    `finished` also clears the session's due session-end extraction. A session
    erased meanwhile is no error: there is nothing left to record.
    """
    with transaction(conn):
        conn.execute(
            "UPDATE sessions SET extracted_through = max(extracted_through, ?), "
            "extraction_due = CASE WHEN ? THEN 0 ELSE extraction_due END WHERE id = ?",
            (int(through_message_id), finished, session_id),
        )


def reset_counters(conn: sqlite3.Connection, session_id: int) -> None:
    """Set both review counters of a session to 0 (a background review ran); no session: no-op."""
    with transaction(conn):
        conn.execute(
            "UPDATE sessions SET turns_since_memory = 0, steps_since_skill = 0 WHERE id = ?",
            (session_id,),
        )


def pending_extractions(conn: sqlite3.Connection, limit: int = 100) -> list[BacklogEntry]:
    """Ended sessions whose session-end extraction is due, the longest-ended first.

    A due session with nothing pending (a quiet-time extraction got there
    first) is listed too: the caller marks it finished.
    """
    sql = _ENTRIES.format(
        where="s.extraction_due = 1 AND s.ended_at IS NOT NULL",
        having="1",
        order="ended_at, id",
    )
    return [backlog_entry(row) for row in conn.execute(sql, (max(1, limit),))]


def quiet_sessions(conn: sqlite3.Connection, before: float, limit: int = 100) -> list[BacklogEntry]:
    """Open sessions whose last message is older than `before` and not yet extracted.

    Imported and internal (review, extraction) sessions are left out; the
    least recently active come first.
    """
    sql = _ENTRIES.format(
        where=f"s.ended_at IS NULL AND s.external_id IS NULL AND s.{_NOT_INTERNAL}",
        having="last_at < ? AND last_id > extracted_through",
        order="last_at, id",
    )
    return [backlog_entry(row) for row in conn.execute(sql, (float(before), max(1, limit)))]


def reviews_due(
    conn: sqlite3.Connection, turns: int, steps: int, limit: int = 100
) -> list[ReviewDue]:
    """Open sessions whose counters reached `turns` or `steps` (0 turns that check off)."""
    rows = conn.execute(
        "SELECT id, session_key, user_key, turns_since_memory, steps_since_skill "
        "FROM sessions WHERE ended_at IS NULL AND "
        f"{_NOT_INTERNAL} AND ((? > 0 AND turns_since_memory >= ?) "
        "OR (? > 0 AND steps_since_skill >= ?)) ORDER BY id LIMIT ?",
        (turns, turns, steps, steps, max(1, limit)),
    )
    return [ReviewDue(int(r[0]), r[1], str(r[2]), int(r[3]), int(r[4])) for r in rows]

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
from memory_core.sessions.models import BacklogEntry, ReviewDue
from memory_core.sessions.sql import SQLITE, reads, writes


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
    row = conn.execute(reads.EXTRACTION_PROGRESS.sqlite, (session_id,)).fetchone()
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
        conn.execute(writes.MARK_EXTRACTED.sqlite, (int(through_message_id), finished, session_id))


def reset_counters(conn: sqlite3.Connection, session_id: int) -> None:
    """Set both review counters of a session to 0 (a background review ran); no session: no-op."""
    with transaction(conn):
        conn.execute(writes.RESET_COUNTERS.sqlite, (session_id,))


def pending_extractions(conn: sqlite3.Connection, limit: int = 100) -> list[BacklogEntry]:
    """Ended sessions whose session-end extraction is due, the longest-ended first.

    A due session with nothing pending (a quiet-time extraction got there
    first) is listed too: the caller marks it finished.
    """
    return [backlog_entry(row) for row in conn.execute(*reads.pending_extractions(SQLITE, limit))]


def quiet_sessions(conn: sqlite3.Connection, before: float, limit: int = 100) -> list[BacklogEntry]:
    """Open sessions whose last message is older than `before` and not yet extracted.

    Imported and internal (review, extraction) sessions are left out; the
    least recently active come first.
    """
    rows = conn.execute(*reads.quiet_sessions(SQLITE, before, limit))
    return [backlog_entry(row) for row in rows]


def reviews_due(
    conn: sqlite3.Connection, turns: int, steps: int, limit: int = 100
) -> list[ReviewDue]:
    """Open sessions whose counters reached `turns` or `steps` (0 turns that check off)."""
    rows = conn.execute(*reads.reviews_due(SQLITE, turns, steps, limit))
    return [ReviewDue(int(r[0]), r[1], str(r[2]), int(r[3]), int(r[4])) for r in rows]

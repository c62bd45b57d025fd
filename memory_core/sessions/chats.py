"""Chat-level facts of state.db: messages left unanswered, and chats that moved.

`unanswered` finds the person's messages of one platform's open sessions that
a turn stored and never answered (the process stopped mid-turn; a fault line
or a stop counts as an answer), every one, not only a session's newest (a
later message answered elsewhere meanwhile does not hide it), so the bot
answers them after a restart, or another replica does. Their mark is kept by
`writes`, under a partial index of the marked rows only.
`migrate_chat` follows a chat that got a new id (Telegram turns a group into a
supergroup): its sessions, their routing keys and so their recall scope move
to the new id.
"""

from __future__ import annotations

import sqlite3

from memory_core.sessions.connection import transaction
from memory_core.sessions.models import SessionInfo, StoredMessage
from memory_core.sessions.reads import stored_message
from memory_core.sessions.sql.reads import MESSAGE_COLUMNS, S_SESSION_COLUMNS, SESSION_WIDTH
from memory_core.sessions.sql.writes import CHAT_SESSIONS, MOVE_SESSION, OPEN_ELSEWHERE
from memory_core.sessions.writes import end_open_session


def unanswered(
    conn: sqlite3.Connection,
    source: str,
    since: float,
    limit: int = 100,
    session_key: str | None = None,
) -> list[tuple[SessionInfo, StoredMessage]]:
    """The person's messages of `source`'s open sessions (only `session_key`'s, if given)
    stored at or after `since` and never answered, each with its session; oldest first.
    A message that got a fault line instead of an answer (`writes.record_notice`) was
    answered."""
    one = "" if session_key is None else "AND s.session_key = ? "
    rows = conn.execute(
        f"SELECT {S_SESSION_COLUMNS}, {MESSAGE_COLUMNS} FROM messages m "
        "INDEXED BY messages_unanswered JOIN sessions s ON s.id = m.session_id "
        "WHERE m.unanswered IS NOT NULL AND s.ended_at IS NULL AND s.source = ? "
        f"AND m.timestamp >= ? {one}"
        "ORDER BY m.timestamp, m.id LIMIT ?",
        (source, since, *(() if session_key is None else (session_key,)), limit),
    ).fetchall()
    return [
        (SessionInfo(*row[:SESSION_WIDTH]), stored_message(row[SESSION_WIDTH:])) for row in rows
    ]


def migrate_chat(
    conn: sqlite3.Connection, source: str, old_chat_id: str, new_chat_id: str, now: float
) -> int:
    """Move every session of chat `old_chat_id` on `source` to `new_chat_id`; how many moved.

    Routing keys ``<source>:<chat type>:<chat id>[:…]`` are rewritten with the
    new id, so the chat's open sessions continue under it (one the new chat
    already has open wins; the old one then ends, reason ``migrated``, and its
    extraction is not lost: it stays in the backlog like any ended session).
    """
    with transaction(conn):
        rows = conn.execute(CHAT_SESSIONS.sqlite, (source, old_chat_id)).fetchall()
        for session_id, key, chat_type, ended_at in rows:
            prefix = f"{source}:{chat_type}:{old_chat_id}"
            if key is not None and (key == prefix or key.startswith(prefix + ":")):
                key = f"{source}:{chat_type}:{new_chat_id}" + key[len(prefix) :]
            if ended_at is None and _open_elsewhere(conn, key, session_id):
                # the new chat already has this conversation open: the old one ends here
                end_open_session(conn, session_id, "migrated", now)
            conn.execute(MOVE_SESSION.sqlite, (new_chat_id, key, session_id))
    return len(rows)


def _open_elsewhere(conn: sqlite3.Connection, key: str | None, session_id: int) -> bool:
    row = conn.execute(OPEN_ELSEWHERE.sqlite, (key, session_id)).fetchone()
    return row is not None

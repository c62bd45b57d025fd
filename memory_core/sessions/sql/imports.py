"""Statements both session stores run to import JSON Lines: the stored sessions an
import's names match, their messages' fingerprints, and their bounds once extended.

The loading itself is each backend's own: SQLite stages rows under a hidden key in
short transactions (`sessions.importer`), PostgreSQL copies them in one
(`pg.session_import`).
"""

from __future__ import annotations

from collections.abc import Collection

from memory_core.sessions.sql.dialect import Dialect, Statement

# The stored session an import's (platform, user key, session name) names.
NAMED_SESSION = Statement(
    "SELECT id, chat_id, chat_type FROM sessions "
    "WHERE source = ? AND user_key = ? AND external_id = ?"
)
# A session the bot made here, by the name an export gave it (its id and start).
BOT_SESSION = Statement(
    "SELECT id, chat_id, chat_type FROM sessions WHERE id = ? AND started_at = ? "
    "AND source = ? AND user_key = ? AND external_id IS NULL"
)
# A session extended by an import: an imported one starts at its first message, a
# session of the bot's keeps its start (its exported name) and stays open.
# Parameters: the first message's time (twice), the last's, the session.
EXTENDED_SESSION = Statement(
    "UPDATE sessions SET "
    "started_at = CASE WHEN external_id IS NULL OR started_at <= ? THEN started_at ELSE ? END, "
    "ended_at = CASE WHEN ended_at IS NULL THEN NULL ELSE {greatest}(ended_at, ?) END "
    "WHERE id = ?"
)


def stored_messages(dialect: Dialect, session_ids: Collection[int]) -> tuple[str, list[object]]:
    """(session id, role, timestamp, content, speaker) of the messages of `session_ids`:
    what an import's fingerprints of them are made from."""
    of, params = dialect.any_of("session_id", session_ids)
    text = f"SELECT session_id, role, timestamp, content, speaker_name FROM messages WHERE {of}"
    return text, params

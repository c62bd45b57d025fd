"""Statements both session stores run to change what a person said after it was stored
(an edit or deletion on the platform, `/forget`), and to check and list their rows.

`sessions.edits` (SQLite) and `pg.session_edits` (PostgreSQL) find the edited
message and its copies, the background runs' sessions that hold a forgotten
text, and the prompts to scrub with these; the rows they then write differ
(PostgreSQL stores each message's `words` and `symbols`, SQLite's triggers
index it). The import's statements are in `imports`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from memory_core.sessions.sql.dialect import Dialect, Statement

# The author of a person's message named by its platform id in one chat: the first row.
EDITED_AUTHOR = Statement(
    "SELECT s.user_key FROM sessions s JOIN messages m ON m.session_id = s.id "
    "WHERE s.source = ? AND s.chat_id = ? AND m.platform_message_id = ? "
    "AND m.role = 'user' ORDER BY m.id LIMIT 1"
)
# That message's rows of one author (the first, and the copies a compression carried
# into later sessions): id, session, author, content, own_words, time, speaker.
# PostgreSQL locks them: `EDITED_ROWS.postgres + " FOR UPDATE OF m"`.
EDITED_ROWS = Statement(
    "SELECT m.id, m.session_id, s.user_key, m.content, m.own_words, m.timestamp, "
    "m.speaker_name FROM sessions s JOIN messages m ON m.session_id = s.id "
    "WHERE s.source = ? AND s.chat_id = ? AND m.platform_message_id = ? "
    "AND m.role = 'user' AND s.user_key = ? ORDER BY m.id"
)
# Every message of a person: id, role, content, tool calls, own_words, time, speaker.
PERSON_MESSAGES = Statement(
    "SELECT m.id, m.role, m.content, m.tool_calls, m.own_words, m.timestamp, "
    "m.speaker_name FROM messages m "
    "JOIN sessions s ON s.id = m.session_id WHERE s.user_key = ? ORDER BY m.id"
)
# A person's stored system prompts, locked on PostgreSQL (a scrubbed one is stored
# with `writes.SET_PROMPT`).
PERSON_PROMPTS = Statement(
    "SELECT id, system_prompt FROM sessions "
    "WHERE user_key = ? AND system_prompt IS NOT NULL ORDER BY id{for_update}"
)
# What one session's messages say, and the tool calls they make.
SESSION_TEXTS = Statement("SELECT content, tool_calls FROM messages WHERE session_id = ?")
# Every message with a wrong count of its session (a sound store has none).
WRONG_MESSAGE_COUNTS = Statement(
    "SELECT count(*) FROM sessions s WHERE message_count != "
    "(SELECT count(*) FROM messages WHERE session_id = s.id)"
)


def forgotten_copies(
    dialect: Dialect, user_key: str, message_ids: Collection[int], forgotten: str
) -> tuple[str, list[object]]:
    """(id, role, tool_calls, timestamp, speaker_name) of `user_key`'s messages
    `message_ids` and of their copies (same conversation, role, time and text) that
    are not `forgotten` already (their text, or their own-words flag)."""
    named, params = dialect.any_of("m.id", sorted(message_ids))
    text = (
        "SELECT DISTINCT c.id, c.role, c.tool_calls, c.timestamp, c.speaker_name "
        "FROM messages m JOIN sessions s ON s.id = m.session_id "
        "JOIN sessions t ON t.root_id = s.root_id AND t.user_key = s.user_key "
        "JOIN messages c ON c.session_id = t.id AND c.role = m.role "
        "AND c.timestamp = m.timestamp AND c.content = m.content "
        f"WHERE {named} AND s.user_key = {dialect.param} "
        f"AND (c.content <> {dialect.param} OR c.own_words) ORDER BY c.id"
    )
    return text, [*params, user_key, forgotten]


def internal_sessions(
    dialect: Dialect, user_key: str, sources: Collection[str]
) -> tuple[str, list[object]]:
    """(id, system_prompt) of `user_key`'s sessions of the background runs `sources`."""
    of, params = dialect.any_of("source", sources)
    text = f"SELECT id, system_prompt FROM sessions WHERE user_key = {dialect.param} AND {of} "
    return text + "ORDER BY id", [user_key, *params]


def drop_sessions(dialect: Dialect, ids: Collection[int]) -> list[tuple[str, list[object]]]:
    """Delete sessions `ids` whole: their messages, the link of their children, the rows.
    The statements in order; the rows deleted are the first's and the last's counts."""
    messages, params = dialect.any_of("session_id", ids)
    children, _ = dialect.any_of("parent_session_id", ids)
    sessions, _ = dialect.any_of("id", ids)
    return [
        (f"DELETE FROM messages WHERE {messages}", params),
        (f"UPDATE sessions SET parent_session_id = NULL WHERE {children}", params),
        (f"DELETE FROM sessions WHERE {sessions}", params),
    ]


def listed_rows(
    table: str, columns: Collection[str], flags: Collection[str], kept: str = "TRUE"
) -> str:
    """Every row of `table` that `kept` holds, in id order: `columns`, the `flags` among
    them as 0 or 1 (a boolean column on PostgreSQL, an integer on SQLite)."""
    listed = [f"CAST({c} AS INTEGER)" if c in flags else c for c in columns]
    return f"SELECT {', '.join(listed)} FROM {table} WHERE {kept} ORDER BY id"


def counted_rows(table: str, kept: str = "TRUE") -> str:
    """How many rows of `table` `kept` holds."""
    return f"SELECT count(*) FROM {table} WHERE {kept}"


FLAG_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "sessions": ("extraction_due",),
    "messages": ("own_words",),
}
"""The flags of each listed table: booleans on PostgreSQL, integers on SQLite."""

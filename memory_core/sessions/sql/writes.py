"""The writes both session stores run, written once: opening, continuing and ending
sessions, their prompt and review counters, the inbox, the extraction mark, a
chat's move, a person's erasure and the pruning of old deliveries.

`memory_core.sessions.writes` (and `inbox`, `backlog`, `chats`, `deliveries`)
run them on SQLite inside its writer's transaction, `memory_core.pg.session_writes`
(and `session_deliveries`) on PostgreSQL inside `PgDatabase.transact`. A row a
write will change is read ``{for_update}`` (PostgreSQL locks it; SQLite's writer
holds the whole database). An insert whose new id the caller needs ends with
``{returning_id}`` (SQLite reads the cursor's `lastrowid`), and one that may meet
an open session of its key already does nothing then (``ON CONFLICT DO NOTHING``):
the caller sees no new row.
"""

from __future__ import annotations

from memory_core.sessions.models import INTERNAL_SOURCES
from memory_core.sessions.sql.dialect import Dialect, Statement

# A new session of a routing key: `writes.new_session_row`'s values.
INSERT_SESSION = Statement(
    "INSERT INTO sessions (source, user_key, owner_token, chat_id, chat_type, thread_id, "
    "session_key, title, model, started_at, parent_session_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING{returning_id}"
)
# A session's continuation: its parent's place, lineage and review counters.
INSERT_CHILD_SESSION = Statement(
    "INSERT INTO sessions (source, user_key, chat_id, chat_type, thread_id, "
    "session_key, model, title, started_at, parent_session_id, root_id, owner_token, "
    "turns_since_memory, steps_since_skill) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING{returning_id}"
)
ROOT_ITSELF = Statement("UPDATE sessions SET root_id = id WHERE id = ?")
OPEN_SESSION = Statement(
    "SELECT id, user_key, chat_id FROM sessions "
    "WHERE session_key = ? AND ended_at IS NULL{for_update}"
)
# The last ended session of a routing key and person: a new one links to it.
PREVIOUS_SESSION = Statement(
    "SELECT id FROM sessions WHERE user_key = ? AND chat_id = ? AND session_key = ? "
    "AND ended_at IS NOT NULL ORDER BY ended_at DESC, id DESC LIMIT 1"
)
# A message stored before, by its platform id or its caller's key.
STORED_MESSAGE = Statement(
    "SELECT id FROM messages WHERE session_id = ? AND "
    "(platform_message_id = ? OR dedupe_key = ?) ORDER BY id LIMIT 1"
)
# Parameters: memory written, turns, skill written, steps (`CounterUpdate`), session id.
BUMP_COUNTERS = Statement(
    "UPDATE sessions SET "
    "turns_since_memory = CASE WHEN ? THEN 0 ELSE turns_since_memory END + ?, "
    "steps_since_skill = CASE WHEN ? THEN 0 ELSE steps_since_skill END + ? WHERE id = ?"
)
RESET_COUNTERS = Statement(
    "UPDATE sessions SET turns_since_memory = 0, steps_since_skill = 0 WHERE id = ?"
)

STORED_PROMPT = Statement("SELECT system_prompt FROM sessions WHERE id = ?{for_update}")
SET_PROMPT = Statement("UPDATE sessions SET system_prompt = ? WHERE id = ?")
CLEAR_PROMPTS = Statement(
    "UPDATE sessions SET system_prompt = NULL "
    "WHERE user_key = ? AND ended_at IS NULL AND system_prompt IS NOT NULL"
)
# A fault line kept on a person's message, which counts as answered then.
RECORD_NOTICE = Statement(
    "UPDATE messages SET notice = ?, unanswered = NULL WHERE id = ? AND role = 'user'"
)

SESSION_END = Statement("SELECT ended_at FROM sessions WHERE id = ?{for_update}")


def end_open_session(
    dialect: Dialect, session_id: int, reason: str, now: float
) -> tuple[str, list[object]]:
    """End an open session: its prompt dropped, due for extraction when it has messages
    past its mark (never an imported session, nor a background agent's own)."""
    internal, params = dialect.none_of("source", INTERNAL_SOURCES)
    p = dialect.param
    sql = (
        f"UPDATE sessions SET ended_at = {p}, end_reason = {p}, system_prompt = NULL, "
        f"extraction_due = CASE WHEN external_id IS NULL AND {internal} "
        "AND extracted_through < coalesce((SELECT max(m.id) FROM messages m "
        f"WHERE m.session_id = sessions.id), 0) THEN {dialect.true} ELSE extraction_due END "
        f"WHERE id = {p}"
    )
    return sql, [now, reason, *params, session_id]


# The extraction mark only moves forward; `finished` clears the session's due extraction.
MARK_EXTRACTED = Statement(
    "UPDATE sessions SET extracted_through = {greatest}(extracted_through, ?), "
    "extraction_due = CASE WHEN ? THEN FALSE ELSE extraction_due END WHERE id = ?"
)

QUEUE = Statement(
    "INSERT INTO inbox (session_key, user_key, source, payload, received_at) "
    "VALUES (?, ?, ?, ?, ?){returning_id}"
)
DROP_QUEUED = Statement("DELETE FROM inbox WHERE id = ?")

# A chat that got a new id: its sessions, in order (`chats.migrate_chat`).
CHAT_SESSIONS = Statement(
    "SELECT id, session_key, chat_type, ended_at FROM sessions "
    "WHERE source = ? AND chat_id = ? ORDER BY id{for_update}"
)
OPEN_ELSEWHERE = Statement(
    "SELECT 1 FROM sessions WHERE session_key = ? AND ended_at IS NULL AND id <> ?"
)
MOVE_SESSION = Statement("UPDATE sessions SET chat_id = ?, session_key = ? WHERE id = ?")

# A person's erasure, in this order: messages, waiting messages, links, sessions.
DELETE_USER_MESSAGES = Statement(
    "DELETE FROM messages WHERE session_id IN (SELECT id FROM sessions WHERE user_key = ?)"
)
DELETE_USER_QUEUED = Statement("DELETE FROM inbox WHERE user_key = ?")
UNLINK_USER_SESSIONS = Statement("UPDATE sessions SET parent_session_id = NULL WHERE user_key = ?")
DELETE_USER_SESSIONS = Statement("DELETE FROM sessions WHERE user_key = ?")

PRUNE_DELIVERIES = Statement("DELETE FROM deliveries WHERE seen_at < ?")

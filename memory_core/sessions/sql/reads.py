"""The reads both session stores run, written once: sessions by id or key, a
conversation's messages and prompt, the inbox, the background backlog, the
activity of a window, a person's totals and their export.

`memory_core.sessions.reads` (and `inbox`, `backlog`, `activity`, `erase`,
`jsonl`) run them on SQLite, `memory_core.pg.session_reads` on PostgreSQL.
Reads that return message or prompt text carry the scope filter
(`scope_sql`), so a session id alone never opens another person's
conversation. A flag column is compared with ``{true}`` (SQLite's 1,
PostgreSQL's TRUE), which keeps each backend's partial index usable.
"""

from __future__ import annotations

from memory_core.scopes import SearchScope
from memory_core.sessions.models import INTERNAL_SOURCES, SearchOptions
from memory_core.sessions.sql.dialect import POSTGRES, Dialect, Statement
from memory_core.sessions.sql.scope import ScopeFilter, scope_sql

SESSION_COLUMNS = (
    "id, source, user_key, chat_id, chat_type, thread_id, session_key, title, model, "
    "started_at, ended_at, end_reason, parent_session_id, root_id, external_id"
)
"""A `SessionInfo`'s columns, in its field order."""
SESSION_WIDTH = len(SESSION_COLUMNS.split(","))
S_SESSION_COLUMNS = ", ".join(f"s.{c.strip()}" for c in SESSION_COLUMNS.split(","))
"""`SESSION_COLUMNS` of sessions aliased ``s``."""
MESSAGE_COLUMNS = (
    "m.id, m.session_id, m.role, m.content, m.timestamp, m.tool_name, m.tool_calls, "
    "m.tool_call_id, m.platform_message_id, m.speaker_name, m.own_words"
)
"""A `StoredMessage`'s columns of messages aliased ``m`` (see `reads.stored_message`)."""

GET_SESSION = Statement(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?")
CURRENT_SESSION = Statement(
    f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_key = ? AND ended_at IS NULL"
)
# The open session of a key, its newest message and its prompt's length (`SessionMark`).
SESSION_MARK = Statement(
    "SELECT s.id, (SELECT max(m.id) FROM messages m WHERE m.session_id = s.id), "
    "{length}(s.system_prompt) FROM sessions s WHERE s.session_key = ? AND s.ended_at IS NULL"
)
COUNTERS = Statement("SELECT turns_since_memory, steps_since_skill FROM sessions WHERE id = ?")


def system_prompt(
    dialect: Dialect, session_id: int, scope: SearchScope
) -> tuple[str, list[object]]:
    """The stored system prompt of a session in `scope`."""
    where, params = scope_sql(dialect, scope)
    sql = f"SELECT s.system_prompt FROM sessions s WHERE s.id = {dialect.param} AND {where}"
    return sql, [session_id, *params]


def messages(
    dialect: Dialect, session_id: int, scope: SearchScope, *, lineage: bool
) -> tuple[str, list[object]]:
    """The messages of a session in `scope` (with `lineage`, of its whole lineage), in order."""
    where, params = scope_sql(dialect, scope)
    p = dialect.param
    target = (
        f"s.root_id = (SELECT x.root_id FROM sessions x WHERE x.id = {p})"
        if lineage
        else f"s.id = {p}"
    )
    sql = (
        f"SELECT {MESSAGE_COLUMNS} FROM messages m JOIN sessions s ON s.id = m.session_id "
        f"WHERE {target} AND {where} ORDER BY m.timestamp, m.id"
    )
    return sql, [session_id, *params]


def root_sessions(dialect: Dialect, scope: SearchScope, limit: int) -> tuple[str, list[object]]:
    """The most recent root sessions in `scope`, newest first."""
    where, params = scope_sql(dialect, scope)
    sql = (
        f"SELECT {S_SESSION_COLUMNS} FROM sessions s WHERE {where} AND s.id = s.root_id "
        f"ORDER BY s.started_at DESC, s.id DESC LIMIT {dialect.param}"
    )
    return sql, [*params, max(1, limit)]


# Messages waiting for their busy session (`inbox`), in the order they arrived.
_QUEUED = "SELECT id, session_key, user_key, source, payload, received_at FROM inbox"
QUEUED_OF_SOURCE = Statement(f"{_QUEUED} WHERE source = ? ORDER BY id LIMIT ?")
QUEUED_OF_SESSION = Statement(f"{_QUEUED} WHERE session_key = ? ORDER BY id LIMIT ?")

EXTRACTION_PROGRESS = Statement("SELECT extracted_through FROM sessions WHERE id = ?")

# One row per session with its newest message and what is left to extract
# (`backlog.backlog_entry`); `where` picks the sessions, `order` sorts them.
_ENTRIES = """
SELECT * FROM (
    SELECT s.id, s.session_key, s.user_key, s.chat_id, s.chat_type, s.thread_id, s.source,
        s.ended_at, s.end_reason, s.extracted_through,
        (SELECT max(m.id) FROM messages m WHERE m.session_id = s.id) AS last_id,
        (SELECT max(m.timestamp) FROM messages m WHERE m.session_id = s.id) AS last_at,
        (SELECT count(*) FROM messages m WHERE m.session_id = s.id
            AND m.id > s.extracted_through) AS pending
    FROM sessions s WHERE {where}
) AS e WHERE {having} ORDER BY {order} LIMIT {limit}
"""


def pending_extractions(dialect: Dialect, limit: int) -> tuple[str, list[object]]:
    """Ended sessions whose session-end extraction is due, the longest-ended first."""
    sql = _ENTRIES.format(
        where=f"s.extraction_due = {dialect.true} AND s.ended_at IS NOT NULL",
        having=dialect.true,
        order="ended_at, id",
        limit=dialect.param,
    )
    return sql, [max(1, limit)]


def quiet_sessions(dialect: Dialect, before: float, limit: int) -> tuple[str, list[object]]:
    """Open sessions quiet since `before` and not yet extracted (not imported, not internal)."""
    internal, params = dialect.none_of("s.source", INTERNAL_SOURCES)
    sql = _ENTRIES.format(
        where=f"s.ended_at IS NULL AND s.external_id IS NULL AND {internal}",
        having=f"last_at < {dialect.param} AND last_id > extracted_through",
        order="last_at, id",
        limit=dialect.param,
    )
    return sql, [*params, float(before), max(1, limit)]


def reviews_due(dialect: Dialect, turns: int, steps: int, limit: int) -> tuple[str, list[object]]:
    """Open sessions (not internal) whose counters reached `turns` or `steps` (0: off)."""
    internal, params = dialect.none_of("source", INTERNAL_SOURCES)
    p = dialect.param
    sql = (
        "SELECT id, session_key, user_key, turns_since_memory, steps_since_skill "
        f"FROM sessions WHERE ended_at IS NULL AND {internal} "
        f"AND (({p} > 0 AND turns_since_memory >= {p}) OR ({p} > 0 AND steps_since_skill >= {p})) "
        f"ORDER BY id LIMIT {p}"
    )
    return sql, [*params, turns, turns, steps, steps, max(1, limit)]


def active_sessions(
    dialect: Dialect, scope: SearchScope, options: SearchOptions
) -> tuple[str, list[object]]:
    """The conversations (root sessions) of `scope` with messages in the options' window,
    the latest active first, each with how many there are in all (last column)."""
    where = ScopeFilter.build(dialect, scope, options)
    sql = (
        "SELECT r.id, r.source, r.chat_type, r.started_at, min(m.timestamp), "
        "max(m.timestamp), count(*), count(*) OVER () "
        "FROM messages m JOIN sessions s ON s.id = m.session_id "
        "JOIN sessions r ON r.id = s.root_id "
        f"WHERE {where.sql} AND m.role IN ('user', 'assistant') "
        f"GROUP BY r.id ORDER BY max(m.timestamp) DESC, r.id DESC LIMIT {dialect.param}"
    )
    return sql, [*where.params, max(1, options.limit)]


USER_TOTALS = Statement(
    "SELECT count(DISTINCT s.id), count(m.id) FROM sessions s "
    "LEFT JOIN messages m ON m.session_id = s.id WHERE s.user_key = ?"
)


def all_user_totals(dialect: Dialect) -> str:
    """Every person's sessions and messages, by user key byte by byte (SQLite's order;
    PostgreSQL is told ``COLLATE "C"``, or it would sort by its locale)."""
    order = 's.user_key COLLATE "C"' if dialect is POSTGRES else "s.user_key"
    return (
        "SELECT s.user_key, count(DISTINCT s.id), count(m.id) FROM sessions s "
        f"LEFT JOIN messages m ON m.session_id = s.id GROUP BY s.user_key ORDER BY {order}"
    )


USER_SESSION_KEYS = Statement(
    "SELECT DISTINCT session_key FROM sessions WHERE user_key = ? AND session_key IS NOT NULL"
)

EXPORT_COLUMNS = (
    "s.external_id, s.id, s.started_at, s.user_key, s.source, s.chat_id, "
    "s.chat_type, m.role, m.content, m.timestamp, m.speaker_name, m.tool_name, "
    "m.tool_calls, m.tool_call_id"
)
"""What `jsonl.export_line` reads from a row of sessions `s` joined with its messages `m`."""
EXPORT_ORDER = "s.id, m.timestamp, m.id"
# Every message of one person, as `jsonl.export_line` reads them.
EXPORT = Statement(
    f"SELECT {EXPORT_COLUMNS} FROM sessions s JOIN messages m ON m.session_id = s.id "
    f"WHERE s.user_key = ? ORDER BY {EXPORT_ORDER}"
)

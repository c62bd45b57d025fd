"""The statements of a session search (`/recall`, the session_search tool), written once.

Both stores answer a query in the same steps (`memory_core.sessions.search`,
`memory_core.pg.session_search`): the lineage floor of the conversation left
out, each term's hits, the scope's statistics for BM25, the chosen roots'
rows. Every statement here carries the scope filter (`ScopeFilter`), built
for the same dialect it is given. What stays each backend's own is the
full-text lookup itself: FTS5's ``MATCH`` on SQLite's word and trigram
indexes, the tsvector ``@@`` (and the symbols' ``LIKE``) in a MATERIALIZED
CTE on PostgreSQL; and the test that a text holds a literal (``instr`` /
``strpos``), a hole of `scanned_hits`.

SQLite's ``CROSS JOIN`` keeps its planner on sessions first (the scope, then
each session's messages); the join condition is in ``WHERE`` so that
PostgreSQL, which takes no ``ON`` after ``CROSS JOIN``, reads the same text
as an inner join and plans it freely.

One statement is SQLite's on both sides: the search's snippets and
PostgreSQL's tokenizer (`memory_core.pg.search_text`) each fill a private
in-memory FTS5 table ``t`` (`INSERT_SCRATCH_TEXT`); the FTS5 command that
empties one is `word_index.fts_delete_all` (the schema, which this package
imports, runs it too).
"""

from __future__ import annotations

from collections.abc import Collection

from memory_core.sessions.sql.dialect import Dialect, Statement
from memory_core.sessions.sql.scope import ScopeFilter

ROOT_CHUNK = 500  # roots per statement when their lengths are read (SQLite's parameter limit)

INSERT_SCRATCH_TEXT = Statement("INSERT INTO t(rowid, content) VALUES (?, ?)")
"""A text into a private in-memory FTS5 table ``t`` (SQLite), to tokenize or mark it."""


Params = tuple[object, ...]


def lineage_floor(dialect: Dialect, where: ScopeFilter) -> tuple[str, Params]:
    """The first message id of the conversation `where` leaves out (NULL: it has none),
    and whether a session in scope holds a message from there on.

    Each session's first id is its own ``min`` (PostgreSQL reads one entry of
    ``messages_session_id`` for it): the minimum over a join of the lineage's
    messages read every one of them, so a long conversation paid for its length
    on every turn's recall."""
    text = (
        "SELECT f.floor, EXISTS (SELECT 1 FROM sessions s "
        f"WHERE {where.sessions_sql} AND EXISTS (SELECT 1 FROM messages n "
        "WHERE n.session_id = s.id AND n.id >= f.floor)) "
        "FROM (SELECT min((SELECT min(m.id) FROM messages m WHERE m.session_id = s.id)) "
        "AS floor FROM sessions s "
        f"WHERE s.root_id = (SELECT x.root_id FROM sessions x WHERE x.id = {dialect.param})) f"
    )
    return text, (*where.sessions_params, where.exclude_lineage_of)


def scanned_hits(
    dialect: Dialect, where: ScopeFilter, holds: str, literal: str
) -> tuple[str, Params]:
    """(message id, root id, timestamp) of the newest `where.max_hits` messages in scope,
    not a tool's, whose text holds `literal`: the base table scanned, the scope first.

    `holds` is the backend's test that ``m.content`` holds the one parameter
    (``instr(m.content, ?) > 0``, ``strpos(m.content, %s) > 0``).
    """
    text = (
        "SELECT m.id, s.root_id, m.timestamp FROM sessions s CROSS JOIN messages m "
        f"WHERE m.session_id = s.id AND {where.sql} AND m.role <> 'tool' AND {holds} "
        f"ORDER BY m.id DESC LIMIT {dialect.param}"
    )
    return text, (*where.params, literal, where.max_hits)


def scope_totals(where: ScopeFilter) -> tuple[str, Params]:
    """The messages and the lineages of the scope's sessions (BM25's collection)."""
    text = (
        "SELECT coalesce(sum(s.message_count), 0), count(DISTINCT s.root_id) FROM sessions s "
        f"WHERE {where.sessions_sql}"
    )
    return text, where.sessions_params


def root_lengths(dialect: Dialect, roots: Collection[int]) -> tuple[str, list[object]]:
    """(root id, messages) of each lineage of `roots` (at most `ROOT_CHUNK` of them)."""
    condition, params = dialect.any_of("root_id", roots)
    return (
        f"SELECT root_id, sum(message_count) FROM sessions WHERE {condition} GROUP BY root_id",
        params,
    )


def root_rows(dialect: Dialect, roots: Collection[int]) -> tuple[str, list[object]]:
    """What a hit shows of each root of `roots`: its id, external_id, source, chat_id,
    chat_type, started_at, and its lineage's end (NULL while a session of it is open)."""
    condition, params = dialect.any_of("r.id", roots)
    text = (
        "SELECT r.id, r.external_id, r.source, r.chat_id, r.chat_type, r.started_at, "
        "(SELECT CASE WHEN count(*) = count(x.ended_at) THEN max(x.ended_at) END "
        "FROM sessions x WHERE x.root_id = r.id) "
        f"FROM sessions r WHERE {condition}"
    )
    return text, params

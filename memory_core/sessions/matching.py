"""Which messages in a caller's scope match each search term.

Every statement carries the scope filter (`ScopeFilter`): nothing outside the
caller's scope is read. Each term is looked up on its own: words, phrases
and prefixes in the word index (CJK bigrams and one-character CJK prefixes
included, so no CJK query scans messages), emoji/symbol literals of three or
more characters in the trigram index, shorter ones with `instr()` on the
base table (the trigram index cannot match them). A word of three or more
letters with no hit is retried as a prefix in the word index (``kube``
finds ``kubernetes``). Words and phrases also match a message's date and
speaker (the index's `about` column), prefixes only its text (`word_index`).

With the current conversation left out (recall), the newer matches (from its
first message on) are looked up only when a session in scope besides it holds a
message from there on: otherwise they could only be its own, all left out, and
a long conversation would read its own history on every turn to find nothing.
"""

from __future__ import annotations

import sqlite3

from memory_core.sessions.query import ParsedQuery, QueryTerm, TermKind
from memory_core.sessions.schema import TRIGRAM_INDEX, WORD_INDEX
from memory_core.sessions.sql import SQLITE, ScopeFilter
from memory_core.sessions.sql.search import lineage_floor, scanned_hits
from memory_core.sessions.word_index import match_columns

Hit = tuple[int, int, float]
"""One matching message: (message id, lineage root id, timestamp)."""


def collect_hits(
    conn: sqlite3.Connection, parsed: ParsedQuery, where: ScopeFilter
) -> tuple[list[QueryTerm], list[list[tuple[int, int, float]]]]:
    terms: list[QueryTerm] = []
    hits: list[list[tuple[int, int, float]]] = []
    floor, newer = _lineage_floor(conn, where)
    for term in parsed.terms:
        found = _term_hits(conn, term, where, floor, newer)
        retry = None if found else prefix_retry(term)
        if retry is not None:
            term = retry
            found = _fts_hits(conn, WORD_INDEX, term, where, floor, newer)
        terms.append(term)
        hits.append(found)
    return terms, hits


def prefix_retry(term: QueryTerm) -> QueryTerm | None:
    """The term to look up instead when `term` found nothing (None: none).

    A word of three or more letters with no hit is tried as the start of
    longer words.
    """
    if term.kind is TermKind.WORD and len(term.text) >= 3:
        return term.as_prefix()
    return None


def _lineage_floor(conn: sqlite3.Connection, where: ScopeFilter) -> tuple[int | None, bool]:
    """The first message id of the conversation left out (None: none, or it has none),
    and whether a session in scope other than it holds a message from there on."""
    if where.exclude_lineage_of is None:
        return None, False
    row = conn.execute(*lineage_floor(SQLITE, where)).fetchone()
    if row is None or row[0] is None:
        return None, False
    return int(row[0]), bool(row[1])


def _term_hits(
    conn: sqlite3.Connection, term: QueryTerm, where: ScopeFilter, floor: int | None, newer: bool
) -> list[tuple[int, int, float]]:
    if term.kind is not TermKind.LITERAL:
        return _fts_hits(conn, WORD_INDEX, term, where, floor, newer)
    if len(term.text) >= 3:
        return _fts_hits(conn, TRIGRAM_INDEX, term, where, floor, newer)
    # Trigram MATCH cannot find fewer than three characters, and LIKE on the
    # FTS table is wrong for 2-character CJK on SQLite 3.40: scan the base table.
    return conn.execute(
        *scanned_hits(SQLITE, where, "instr(m.content, ?) > 0", term.text)
    ).fetchall()


def _fts_hits(
    conn: sqlite3.Connection,
    index: str,
    term: QueryTerm,
    where: ScopeFilter,
    floor: int | None,
    newer: bool,
) -> list[Hit]:
    """The newest `where.max_hits` messages in scope that match `term`.

    FTS5 first intersects the term with the caller's owner token (cheap:
    it seeks in the shorter list), then SQL applies the real scope. The
    conversation left out (`exclude_lineage_of`, the current one for
    recall) is the newest: in a long one its mentions would take every one of
    the newest `max_hits` places and leave nothing older to find. So the
    messages older than its first (`floor`) are capped on their own, and the
    newer ones (it, and other chats meanwhile) on theirs; those only when a session in
    scope besides it holds a message from its first on (`newer`): else they are all its.
    """
    columns = match_columns(term.kind) if index == WORD_INDEX else "content"
    expression = f'owner : "{where.owner}" AND {columns} : {term.match_expression()}'
    if floor is None:
        return _fts_range(conn, index, expression, where, "")
    older = _fts_range(conn, index, expression, where, f"AND rowid < {int(floor)} ")
    if not newer:
        return older[: where.max_hits]
    found = _fts_range(conn, index, expression, where, f"AND rowid >= {int(floor)} ")
    return (found + older)[: where.max_hits]


def _fts_range(
    conn: sqlite3.Connection, index: str, expression: str, where: ScopeFilter, rowids: str
) -> list[Hit]:
    return conn.execute(
        "SELECT m.id, s.root_id, m.timestamp FROM messages m "
        "CROSS JOIN sessions s ON s.id = m.session_id "
        f"WHERE m.id IN (SELECT rowid FROM {index} WHERE {index} MATCH ? {rowids}"
        f"ORDER BY rowid DESC LIMIT ?) AND {where.sql}" + (" ORDER BY m.id DESC" if rowids else ""),
        (expression, where.max_hits, *where.params),
    ).fetchall()

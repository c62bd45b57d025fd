"""Scoped search over session history, ranked per conversation.

How a query is answered:

1. `parse_query` turns the text into quoted terms (see `query`).
2. Every SQL statement carries the scope (`sessions.user_key = ?`, plus
   `chat_id = ?` when a chat is given, and `thread_id = ?` in a thread or
   no thread outside them), the time window, the lineage to skip and the
   internal-source filter (`ScopeFilter`). Nothing outside the scope
   is read, so nothing outside it can be returned or even weigh on a score.
3. Each term is looked up on its own (`matching`): words, phrases and
   prefixes in the word index, where Chinese/Japanese/Korean text is held as
   overlapping bigrams, so a CJK query's bigrams are words like any other
   (部署失败 finds 部署…迁移失败) and weigh on the score the same way; emoji
   of three or more characters in the trigram index, shorter ones with
   `instr()` on the base table. A word of three or more letters with no hit
   is retried as a prefix (``kube`` finds ``kubernetes``).
4. Hits are grouped by lineage root and ranked (`ranking`): each conversation as a
   BM25 document plus its best passage, then the top chosen to cover the query.
5. The best messages of each top conversation become marked snippets.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from typing import Any

from memory_core.scopes import SearchScope
from memory_core.sessions.matching import Hit, collect_hits
from memory_core.sessions.models import (
    DEFAULT_SEARCH_OPTIONS,
    MATCH_END,
    MATCH_START,
    SearchOptions,
    SessionHit,
    Snippet,
)
from memory_core.sessions.query import QueryTerm, parse_query
from memory_core.sessions.ranking import (
    DEFAULT_RANKING,
    MAX_LIMIT,
    Ranking,
    ScopeStats,
    Scored,
    choose_roots,
    hit_roots,
    score_hits,
)
from memory_core.sessions.snippets import highlighted_texts
from memory_core.sessions.sql import SQLITE, ScopeFilter
from memory_core.sessions.sql.search import ROOT_CHUNK, root_lengths, root_rows, scope_totals

__all__ = [
    "DEFAULT_RANKING",
    "MATCH_END",
    "MATCH_START",
    "MAX_LIMIT",
    "Ranking",
    "ScopeFilter",
    "ScopeStats",
    "Scored",
    "SearchOptions",
    "SearchScope",
    "SessionHit",
    "Snippet",
    "choose_roots",
    "hit_roots",
    "score_hits",
    "search_sessions",
    "snippet_messages",
]


def search_sessions(
    conn: sqlite3.Connection,
    query: str,
    scope: SearchScope,
    options: SearchOptions = DEFAULT_SEARCH_OPTIONS,
    *,
    ranking: Ranking = DEFAULT_RANKING,
) -> list[SessionHit]:
    """Ranked conversations of `scope` matching `query` (see the module docstring)."""
    parsed = parse_query(query)
    limit = options.limit
    if not parsed or limit < 1:
        return []
    where = ScopeFilter.build(SQLITE, scope, options)
    terms, hits = collect_hits(conn, parsed, where)
    if not any(hits):
        return []
    stats = _scope_stats(conn, where, hit_roots(hits))
    scored = score_hits(hits, stats, ranking)
    top = choose_roots(scored, limit, ranking)
    scores = {r: scored.scores[r][0] for r in top}
    weights = scored.message_weight
    return _hits(conn, top, scores, terms, hits, weights, options.snippets_per_hit)


def _scope_stats(conn: sqlite3.Connection, where: ScopeFilter, roots: set[int]) -> ScopeStats:
    messages, lineages = conn.execute(*scope_totals(where)).fetchone()
    ordered = sorted(roots)
    lengths: dict[int, int] = {}
    for start in range(0, len(ordered), ROOT_CHUNK):
        rows = conn.execute(*root_lengths(SQLITE, ordered[start : start + ROOT_CHUNK]))
        lengths.update(rows.fetchall())
    return ScopeStats.of(messages, lineages, lengths)


def _hits(
    conn: sqlite3.Connection,
    roots: list[int],
    scores: dict[int, float],
    terms: list[QueryTerm],
    hits: list[list[Hit]],
    weights: dict[int, float],
    per_hit: int,
) -> list[SessionHit]:
    """SessionHits for the chosen roots, each with its `per_hit` best messages as snippets."""
    chosen = snippet_messages(roots, hits, weights, per_hit)
    ids = [m for root in roots for m in chosen[root]]
    texts = highlighted_texts(conn, ids, terms)
    details = _message_details(conn, ids)
    rows = {row[0]: row[1:] for row in conn.execute(*root_rows(SQLITE, roots))}
    return [
        _session_hit(root, rows[root], scores[root], chosen[root], texts, details) for root in roots
    ]


def snippet_messages(
    roots: list[int], hits: list[list[Hit]], weights: dict[int, float], per_hit: int
) -> dict[int, list[int]]:
    """The `per_hit` best messages of each root: by weight, then newest (by timestamp)."""
    wanted = set(roots)
    where_root = {m: (r, ts) for found in hits for m, r, ts in found if r in wanted}
    chosen: dict[int, list[int]] = defaultdict(list)
    for message_id in sorted(where_root, key=lambda m: (-weights[m], -where_root[m][1])):
        root = where_root[message_id][0]
        if len(chosen[root]) < per_hit:
            chosen[root].append(message_id)
    return chosen


def _message_details(conn: sqlite3.Connection, ids: list[int]) -> dict[int, tuple[str, float]]:
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT id, role, timestamp FROM messages WHERE id IN ({marks})", ids)
    return {row[0]: (row[1], row[2]) for row in rows}


def _session_hit(
    root: int,
    row: tuple[Any, ...],
    score: float,
    message_ids: list[int],
    texts: dict[int, str],
    details: dict[int, tuple[str, float]],
) -> SessionHit:
    snippets = tuple(
        Snippet(m, details[m][0], details[m][1], texts.get(m, "")) for m in message_ids
    )
    return SessionHit(root, row[0], row[1], row[2], row[3], row[4], row[5], score, snippets)

"""Scoped search over session history on PostgreSQL, ranked as on SQLite.

The steps of `memory_core.sessions.search`, with its pure parts shared:
`parse_query` cuts the text into terms; every statement carries the scope
(`ScopeFilter`, the rules of SQLite's `ScopeFilter`), so nothing outside it
is read or weighs on a score; each term is looked up on its own
(`session_search_terms`); the hits are scored by `score_hits` (BM25 over
lineage roots from the scope's own statistics, the best-message bonus,
recency as the tie-break) and the best messages become snippets marked by
`snippets.mark_heads`, the very code SQLite's snippets come from, over the
same first `FETCH_BYTES` of each message. A query thus returns the same
conversations, in the same order, with the same scores and snippets, on both
backends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncCursor

from memory_core.pg.database import Connection
from memory_core.pg.session_search_terms import collect_hits
from memory_core.scopes import SearchScope
from memory_core.sessions.models import DEFAULT_SEARCH_OPTIONS, SearchOptions, SessionHit, Snippet
from memory_core.sessions.query import QueryTerm, parse_query
from memory_core.sessions.search import (
    DEFAULT_RANKING,
    Ranking,
    ScopeStats,
    choose_roots,
    hit_roots,
    score_hits,
    snippet_messages,
)
from memory_core.sessions.snippets import FETCH_BYTES, decode_head, mark_heads
from memory_core.sessions.sql import POSTGRES, ScopeFilter
from memory_core.sessions.sql.search import ROOT_CHUNK, root_lengths, root_rows, scope_totals

__all__ = ["search_sessions"]


async def search_sessions(
    conn: Connection,
    scope: SearchScope,
    query: str,
    options: SearchOptions = DEFAULT_SEARCH_OPTIONS,
    *,
    ranking: Ranking = DEFAULT_RANKING,
) -> list[SessionHit]:
    """Ranked conversations of `scope` matching `query` (see the module docstring)."""
    parsed = parse_query(query)
    if not parsed or options.limit < 1:
        return []
    where = ScopeFilter.build(POSTGRES, scope, options)
    terms, hits = await collect_hits(conn, parsed, where, scope.user_key)
    if not any(hits):
        return []
    stats = await _scope_stats(conn, where, hit_roots(hits))
    scored = score_hits(hits, stats, ranking)
    weights = scored.message_weight
    top = choose_roots(scored, options.limit, ranking)
    chosen = snippet_messages(top, hits, weights, options.snippets_per_hit)
    ids = [m for root in top for m in chosen[root]]
    async with conn.pipeline():  # the snippets' messages and the roots: one round trip
        heads = await _send_messages(conn, ids)
        roots = await _send_roots(conn, top)
    messages = await _messages(await heads.fetchall() if heads else [], terms)
    rows = {int(row[0]): tuple(row[1:]) for row in await roots.fetchall()}
    return [
        _session_hit(root, rows[root], scored.scores[root][0], chosen[root], messages)
        for root in top
    ]


def _session_hit(
    root: int,
    row: tuple[Any, ...],
    score: float,
    message_ids: list[int],
    messages: dict[int, Snippet],
) -> SessionHit:
    external_id, source, chat_id, chat_type, started_at, ended_at = row
    snippets = tuple(messages[m] for m in message_ids if m in messages)
    return SessionHit(
        root, external_id, source, chat_id, chat_type, started_at, ended_at, score, snippets
    )


async def _scope_stats(conn: Connection, where: ScopeFilter, roots: set[int]) -> ScopeStats:
    """BM25's collection: the scope's totals and the hit roots' lengths, one round trip."""
    ordered = sorted(roots)
    async with conn.pipeline():
        totals = await conn.execute(*scope_totals(where), prepare=False)
        chunks = [
            await conn.execute(
                *root_lengths(POSTGRES, ordered[start : start + ROOT_CHUNK]), prepare=False
            )
            for start in range(0, len(ordered), ROOT_CHUNK)
        ]
    row = await totals.fetchone()
    messages, lineages = (int(row[0]), int(row[1])) if row else (0, 0)
    lengths: dict[int, int] = {}
    for cursor in chunks:
        lengths.update((int(r), int(n)) for r, n in await cursor.fetchall())
    return ScopeStats.of(messages, lineages, lengths)


async def _send_messages(conn: Connection, ids: Sequence[int]) -> AsyncCursor[Any] | None:
    """The first `FETCH_BYTES` of each message of `ids`, sent (None: no ids)."""
    if not ids:
        return None
    return await conn.execute(
        "SELECT id, role, timestamp, left(content, %s), octet_length(content) "
        "FROM messages WHERE id = ANY(%s) ORDER BY id",
        (FETCH_BYTES, list(ids)),
        prepare=False,
    )


async def _messages(rows: list[tuple[Any, ...]], terms: Sequence[QueryTerm]) -> dict[int, Snippet]:
    """A marked snippet for each message read (those that still exist).

    What is read of a message is SQLite's: its first `FETCH_BYTES` bytes of
    UTF-8 (a character cut at the end dropped), in ascending id order.
    """
    if not rows:
        return {}
    heads = [
        (int(m), decode_head(head.encode()[:FETCH_BYTES]), int(size) > FETCH_BYTES)
        for m, _, _, head, size in rows
    ]
    texts = await asyncio.to_thread(mark_heads, heads, terms)
    return {
        int(m): Snippet(int(m), role, float(ts), texts.get(int(m), ""))
        for m, role, ts, _, _ in rows
    }


async def _send_roots(conn: Connection, roots: Sequence[int]) -> AsyncCursor[Any]:
    """external_id, source, chat_id, chat_type, started_at and the lineage's end, per
    root, sent."""
    text, params = root_rows(POSTGRES, roots)
    return await conn.execute(text, params, prepare=False)

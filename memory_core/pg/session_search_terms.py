"""Which messages in a caller's scope match each search term, on PostgreSQL.

The lookups of SQLite's `sessions.matching`, one for one:

- words, phrases and prefixes in `messages.words` (the tsvector of exactly the
  tokens SQLite's word index holds, GIN-indexed): the term's text is cut into
  lexemes by the same tokenizer (`search_text.word_tokens`), and the tsquery
  is built from those quoted lexemes (phrases with `<->`, a prefix's last
  lexeme with `:*D`: the message's text only, not its date and speaker words,
  as SQLite's `word_index.match_columns`), never from the user's text;
- emoji/symbol literals of three or more characters in `messages.symbols`
  (the rows SQLite keeps in its trigram index) with `LIKE`;
- shorter ones with `strpos()` on the content of non-tool messages in scope;
- a word of three or more letters with no hit is retried as a prefix.

Round trips: every term's statements are sent together in one pipeline
(psycopg's pipeline mode: one round trip for all of them, each still its own
statement with its own plan), then the prefix retries of the terms that found
nothing in a second one; the lineage floor they need comes first. The same
statement says whether any session in scope besides the conversation left out
holds a message from the floor on: when none does, the newer range could only
find that conversation's own messages (all left out), so it is not looked up,
and a long conversation's own history is never read by its recall
(`matching._lineage_floor`, the same on SQLite).

As in SQLite, an index lookup takes the person's newest `max_hits` matches
first and applies the rest of the scope after (SQLite's FTS5 narrows by the
owner column, then SQL filters), with the lineage left out capped on its own
(`exclude_lineage_of`, see `matching._fts_hits`); hits come in the order
SQLite gives them, as they break ties between equal snippets.

Plans: every statement is sent unprepared (``prepare=False``), so PostgreSQL
plans it for its very values each time. Prepared (psycopg does so on a
statement's fifth run on a connection), the server soon keeps a generic plan
that knows neither the term nor the person, and for a common word of a person
with a long history that plan costs 100 ms and more where the custom one costs
a few. The person's newest matches are a MATERIALIZED CTE: read once, then
joined to the scope (as a subquery the planner, misjudging how many sessions
the scope holds, ran it again for each of them); in it, the person's sessions
are an array of ids, so that the word index is read once and ANDed with
`messages_session_id` (joined, the index was read again for every session).
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncCursor

from memory_core.pg.database import Connection
from memory_core.pg.search_text import TEXT_WEIGHT, quote_lexeme, word_tokens
from memory_core.sessions.matching import Hit, prefix_retry
from memory_core.sessions.query import ParsedQuery, QueryTerm, TermKind
from memory_core.sessions.sql import POSTGRES, ScopeFilter
from memory_core.sessions.sql.search import lineage_floor, scanned_hits

__all__ = ["collect_hits", "term_tsquery"]


def term_tsquery(term: QueryTerm) -> str | None:
    """The `::tsquery` literal of a word-index term (None: it has no token, so no match)."""
    lexemes = [quote_lexeme(token) for token in word_tokens(term.text)]
    if not lexemes:
        return None
    if term.kind is TermKind.PREFIX:
        lexemes[-1] += ":*" + TEXT_WEIGHT
    return " <-> ".join(lexemes)


async def collect_hits(
    conn: Connection, parsed: ParsedQuery, where: ScopeFilter, owner: str
) -> tuple[list[QueryTerm], list[list[Hit]]]:
    """Each term as looked up (a retried word as its prefix), and its hits.

    `owner` is the scope's user key: the index lookups are narrowed to that
    person's messages before the rest of the scope applies.
    """
    floor, newer = await _lineage_floor(conn, where)
    lookup = _Lookup(conn, where, owner, floor, newer)
    terms = list(parsed.terms)
    async with conn.pipeline():  # every term's statements in one round trip
        sent = [await lookup.term_hits(term) for term in terms]
    hits = [await found.hits() for found in sent]
    retries = {
        i: retry
        for i, term in enumerate(terms)
        if not hits[i] and (retry := prefix_retry(term)) is not None
    }
    if retries:
        async with conn.pipeline():  # and the retries' in a second one
            again = {i: await lookup.word_hits(retry) for i, retry in retries.items()}
        for i, found in again.items():
            terms[i], hits[i] = retries[i], await found.hits()
    return terms, hits


async def _lineage_floor(conn: Connection, where: ScopeFilter) -> tuple[int | None, bool]:
    """The first message id of the conversation left out (None: none, or it has none),
    and whether a session in scope other than it holds a message from there on."""
    if where.exclude_lineage_of is None:
        return None, False
    text, params = lineage_floor(POSTGRES, where)
    cursor = await conn.execute(text, params, prepare=False)
    row = await cursor.fetchone()
    if row is None or row[0] is None:
        return None, False
    return int(row[0]), bool(row[1])


class _Sent:
    """One term's statements, sent (in a pipeline: read once it is synced); its hits,
    the rows of each statement in turn, cut to `cap` when given."""

    def __init__(self, cursors: list[AsyncCursor[Any]], cap: int | None = None) -> None:
        self._cursors = cursors
        self._cap = cap

    async def hits(self) -> list[Hit]:
        found = [hit for cursor in self._cursors for hit in _hits(await cursor.fetchall())]
        return found if self._cap is None else found[: self._cap]


class _Lookup:
    """The statements of one search: the scope, the owner and the lineage floor. Each
    method sends a term's statements and returns them unread (`_Sent`), so that a
    pipeline carries every term's at once."""

    def __init__(
        self, conn: Connection, where: ScopeFilter, owner: str, floor: int | None, newer: bool
    ) -> None:
        self._conn = conn
        self._where = where
        self._owner = owner
        self._floor = floor
        self._newer = newer  # whether the newer range can find anything

    async def term_hits(self, term: QueryTerm) -> _Sent:
        if term.kind is not TermKind.LITERAL:
            return await self.word_hits(term)
        if len(term.text) >= 3:
            pattern = "%" + _like_escape(term.text) + "%"
            return await self._indexed("c.symbols LIKE %s", pattern)
        # SQLite scans the base table for fewer than three characters (its
        # trigram index cannot match them): the scope first, then the limit.
        text, params = scanned_hits(POSTGRES, self._where, "strpos(m.content, %s) > 0", term.text)
        cursor = await self._conn.execute(text, params, prepare=False)
        return _Sent([cursor])

    async def word_hits(self, term: QueryTerm) -> _Sent:
        query = term_tsquery(term)
        if query is None:
            return _Sent([])
        return await self._indexed("c.words @@ %s::tsquery", query)

    async def _indexed(self, match: str, value: str) -> _Sent:
        """The person's newest matches, then the scope (see `matching._fts_hits`)."""
        if self._floor is None:
            return _Sent([await self._range(match, value, "", "")])
        older = await self._range(match, value, "AND c.id < %s ", "DESC", self._floor)
        if not self._newer:  # only the conversation left out is there: all of it left out
            return _Sent([older], self._where.max_hits)
        newer = await self._range(match, value, "AND c.id >= %s ", "DESC", self._floor)
        return _Sent([newer, older], self._where.max_hits)

    async def _range(
        self, match: str, value: str, ids: str, order: str, *floor: int
    ) -> AsyncCursor[Any]:
        where = self._where
        cursor = await self._conn.execute(
            "WITH m AS MATERIALIZED (SELECT c.id, c.session_id, c.timestamp FROM messages c "
            "WHERE c.session_id = ANY(ARRAY(SELECT o.id FROM sessions o WHERE o.user_key = %s)) "
            f"AND {match} {ids}ORDER BY c.id DESC LIMIT %s) "
            "SELECT m.id, s.root_id, m.timestamp FROM m JOIN sessions s ON s.id = m.session_id "
            f"WHERE {where.sql} ORDER BY m.id {order}",
            (self._owner, value, *floor, where.max_hits, *where.params),
            prepare=False,
        )
        return cursor


def _hits(rows: list[tuple[Any, ...]]) -> list[Hit]:
    return [(int(m), int(r), float(ts)) for m, r, ts in rows]


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

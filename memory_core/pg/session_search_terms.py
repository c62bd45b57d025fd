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

Round trips: every term's lookups are one statement, a MATERIALIZED CTE per
term and id range (each planned for its very values, as a statement of its own
was), their rows joined to the scope once and told apart by a number; the
short literals' scans go beside it in one pipeline; the prefix retries of the
terms that found nothing are a second such statement. Sent as statements of
their own, the server planned the scope's join once a term and range, and the
replica paid for each statement. The lineage floor they need comes first. The
same statement says whether any session in scope besides the conversation left
out holds a message from the floor on: when none does, the newer range could
only find that conversation's own messages (all left out), so it is not looked
up, and a long conversation's own history is never read by its recall
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

from collections.abc import Sequence
from typing import Any

from memory_core.pg.database import Connection
from memory_core.pg.search_text import TEXT_WEIGHT, quote_lexeme, word_tokens
from memory_core.sessions.matching import Hit, prefix_retry
from memory_core.sessions.query import ParsedQuery, QueryTerm, TermKind
from memory_core.sessions.sql import POSTGRES, ScopeFilter
from memory_core.sessions.sql.search import lineage_floor, scanned_hits

__all__ = ["collect_hits", "term_tsquery"]

Params = tuple[object, ...]


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
    hits = await lookup.hits(terms)
    retries = {
        i: retry
        for i, term in enumerate(terms)
        if not hits[i] and (retry := prefix_retry(term)) is not None
    }
    if retries:  # the retries in a second statement
        again = await lookup.hits(list(retries.values()))
        for i, found in zip(retries, again, strict=True):
            terms[i], hits[i] = retries[i], found
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


class _Lookup:
    """The statements of one search: the scope, the owner and the lineage floor.

    `hits(terms)` sends every index lookup of `terms` as one statement (a
    MATERIALIZED CTE per term and range, joined to the scope once: `_Ranges`)
    and each short literal's base-table scan beside it, in one pipeline."""

    def __init__(
        self, conn: Connection, where: ScopeFilter, owner: str, floor: int | None, newer: bool
    ) -> None:
        self._conn = conn
        self._where = where
        self._owner = owner
        self._floor = floor
        self._newer = newer  # whether the newer range can find anything

    async def hits(self, terms: Sequence[QueryTerm]) -> list[list[Hit]]:
        ranges = _Ranges(self._owner, self._floor, self._newer)
        scans: dict[int, tuple[str, Params]] = {}
        for i, term in enumerate(terms):
            if term.kind is not TermKind.LITERAL:
                query = term_tsquery(term)
                if query is not None:  # no token: no match
                    ranges.add(i, "c.words @@ %s::tsquery", query)
            elif len(term.text) >= 3:
                ranges.add(i, "c.symbols LIKE %s", "%" + _like_escape(term.text) + "%")
            else:  # SQLite scans the base table for fewer than three characters (its
                # trigram index cannot match them): the scope first, then the limit.
                holds = "strpos(m.content, %s) > 0"
                scans[i] = scanned_hits(POSTGRES, self._where, holds, term.text)
        statements = ([ranges.statement(self._where)] if ranges else []) + list(scans.values())
        rows = await self._send(statements)
        found: list[list[Hit]] = [[] for _ in terms]
        if ranges:
            for i, part in ranges.split(rows.pop(0), self._where.max_hits).items():
                found[i] = part
        for i, scanned in zip(scans, rows, strict=True):
            found[i] = _hits(scanned)
        return found

    async def _send(self, statements: list[tuple[str, Params]]) -> list[list[tuple[Any, ...]]]:
        """Each statement's rows; more than one go in one pipeline (one round trip)."""
        if len(statements) == 1:
            cursor = await self._conn.execute(*statements[0], prepare=False)
            return [await cursor.fetchall()]
        async with self._conn.pipeline():
            cursors = [await self._conn.execute(t, p, prepare=False) for t, p in statements]
        return [await cursor.fetchall() for cursor in cursors]


class _Ranges:
    """The person's newest matches of each term, then the scope (see
    `matching._fts_hits`), as one statement: a MATERIALIZED CTE per term and id range
    (the newer range, from the floor on, first; only it cut to `max_hits` with the
    older), their rows joined to the scope once and told apart by their number.

    Each row's session is read by its key (a LATERAL lookup that the planner keeps
    as such): as a plain join, misjudging both sides as a few rows, it compared each
    of a heavy person's 1,000 hits with each of their 460 sessions (26 ms)."""

    def __init__(self, owner: str, floor: int | None, newer: bool) -> None:
        self._owner, self._floor, self._newer = owner, floor, newer
        self._ctes: list[str] = []
        self._params: list[object] = []
        self._parts: list[tuple[int, bool]] = []  # per CTE: (term, ascending)

    def __bool__(self) -> bool:
        return bool(self._ctes)

    def add(self, term: int, match: str, value: str) -> None:
        if self._floor is None:
            self._cte(term, match, value, "", ascending=True)
            return
        if self._newer:  # else only the conversation left out is there: all of it left out
            self._cte(term, match, value, "AND c.id >= %s ", False, self._floor)
        self._cte(term, match, value, "AND c.id < %s ", False, self._floor)

    def _cte(
        self, term: int, match: str, value: str, ids: str, ascending: bool, *floor: int
    ) -> None:
        self._ctes.append(
            f"t{len(self._ctes)} AS MATERIALIZED (SELECT c.id, c.session_id, c.timestamp "
            "FROM messages c WHERE c.session_id = ANY(ARRAY("
            "SELECT o.id FROM sessions o WHERE o.user_key = %s)) "
            f"AND {match} {ids}ORDER BY c.id DESC LIMIT %s)"
        )
        self._parts.append((term, ascending))
        self._params.extend((self._owner, value, *floor, None))  # None: max_hits, set later

    def statement(self, where: ScopeFilter) -> tuple[str, Params]:
        params = [where.max_hits if p is None else p for p in self._params]
        union = " UNION ALL ".join(
            f"SELECT {n} AS k, id, session_id, timestamp FROM t{n}" for n in range(len(self._ctes))
        )
        text = (
            f"WITH {', '.join(self._ctes)} "
            f"SELECT m.k, m.id, s.root_id, m.timestamp FROM ({union}) m "
            "CROSS JOIN LATERAL (SELECT s.root_id FROM sessions s "
            f"WHERE s.id = m.session_id AND {where.sql} LIMIT 1) s "
            f"ORDER BY m.k, {self._order()}"
        )
        return text, (*params, *where.params)

    def _order(self) -> str:
        """Within each CTE's rows: ascending ids (no floor) or descending."""
        if all(ascending for _, ascending in self._parts):
            return "m.id"
        return "m.id DESC"

    def split(self, rows: list[tuple[Any, ...]], cap: int) -> dict[int, list[Hit]]:
        """Each term's hits: its CTEs' rows in turn, cut to `cap` when the floor split them."""
        by_part: dict[int, list[Hit]] = {}
        for k, m, r, ts in rows:
            by_part.setdefault(int(k), []).append((int(m), int(r), float(ts)))
        found: dict[int, list[Hit]] = {}
        for n, (term, _) in enumerate(self._parts):
            found.setdefault(term, []).extend(by_part.get(n, []))
        if self._floor is None:
            return found
        return {term: hits[:cap] for term, hits in found.items()}


def _hits(rows: list[tuple[Any, ...]]) -> list[Hit]:
    return [(int(m), int(r), float(ts)) for m, r, ts in rows]


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

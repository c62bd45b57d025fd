"""A search's per-term lookups travel together: one statement for every term's.

Each term of a query is looked up in the index by its own MATERIALIZED CTE (two
when the current conversation is left out: its newer and its older matches), each
planned for its very values. Sent as statements of their own, a query of eight
words waited for the server sixteen times and more, and the server planned the
scope's join sixteen times; as CTEs of one statement they go in one round trip,
the scope joined once, and the prefix retries of the words that found nothing
in a second one. What ranks and shows the hits goes in two pipelines. The
results are the same (tests/memory_core/pg/test_search_contract.py).
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncPipeline

from memory_core.pg.database import PgDatabase
from memory_core.pg.session_import import import_lines
from memory_core.pg.session_search import search_sessions
from memory_core.pg.sessions_schema import SESSION_MIGRATIONS
from memory_core.scopes import SearchScope
from memory_core.sessions.models import SearchOptions
from memory_core.sessions.sql import POSTGRES, ScopeFilter
from memory_core.sessions.sql.search import lineage_floor
from tests.memory_core.sessions.helpers import kiwi_session

PERSON = "telegram-5"
WORDS = ("orchard", "harvest", "ladder", "basket", "cider", "pruning", "frost", "blossom")


class CountingConnection(psycopg.AsyncConnection[Any]):
    """Notes each statement, whether it went in a pipeline, and each pipeline opened."""

    sent: list[bool]
    texts: list[str]
    pipelines: int

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self.sent.append(self._pipeline is not None)
        self.texts.append(str(query))
        return await super().execute(query, params, **kwargs)

    @asynccontextmanager
    async def pipeline(self) -> AsyncIterator[AsyncPipeline]:
        self.pipelines += 1
        async with super().pipeline() as piped:
            yield piped


def _lines() -> list[str]:
    lines = []
    for n in range(200):
        words = " ".join(WORDS[(n * k) % len(WORDS)] for k in (1, 3))
        lines.append(json.dumps({
            "session": f"s{n % 10}", "user": PERSON, "platform": "telegram", "chat": "5",
            "chat_type": "private", "role": "user" if n % 2 == 0 else "assistant",
            "content": f"the {words} note {n}", "timestamp": 1_700_000_000 + n * 60,
        }))  # fmt: skip
    return lines


async def test_every_terms_statements_go_in_one_round_trip(pg_database: str) -> None:
    async with PgDatabase(pg_database) as db:
        await db.migrate(SESSION_MIGRATIONS)
        await import_lines(db, io.BytesIO("".join(x + "\n" for x in _lines()).encode()))
        async with db.connection() as conn:
            cur = await conn.execute("SELECT max(id) FROM sessions")
            row = await cur.fetchone()
    current = int(row[0]) if row else 0  # left out, as recall leaves the current one out
    scope = SearchScope(user_key=PERSON, chat_id="5")
    options = SearchOptions(limit=4, max_hits_per_term=50, exclude_lineage_of=current)
    query = " ".join(WORDS) + " orch"  # eight words, and one found only as a prefix
    async with await CountingConnection.connect(pg_database, autocommit=True) as conn:
        conn.sent, conn.texts, conn.pipelines = [], [], 0
        found = await search_sessions(conn, scope, query, options)
    assert found, "the person's history matches"
    lookups = [t for t in conn.texts if "AS MATERIALIZED" in t]
    assert len(lookups) == 2, conn.texts  # the terms, then the retry of the one with no hit
    assert lookups[0].count("AS MATERIALIZED") == 2 * (len(WORDS) + 1)  # newer, older a term
    assert lookups[1].count("AS MATERIALIZED") == 2
    round_trips = conn.sent.count(False) + conn.pipelines
    assert round_trips <= 5, conn.sent  # the floor, the terms, the retry, ranking, snippets


def _session(name: str, chat: str, chat_type: str, start: int, count: int) -> list[str]:
    return kiwi_session(PERSON, name, chat, chat_type, start, count)


async def _search_kiwi(url: str, current: int) -> tuple[list[int], list[str]]:
    """The roots found for "kiwi" leaving `current` out, and the statements sent."""
    scope = SearchScope(user_key=PERSON, chat_id=None, outside_threads=True)
    options = SearchOptions(limit=4, max_hits_per_term=5, exclude_lineage_of=current)
    async with await CountingConnection.connect(url, autocommit=True) as conn:
        conn.sent, conn.texts, conn.pipelines = [], [], 0
        found = await search_sessions(conn, scope, "kiwi", options)
    return [hit.session_id for hit in found], conn.texts


async def test_a_long_conversations_own_messages_are_not_read_by_its_recall(
    pg_database: str,
) -> None:
    """The newer range (from the current conversation's first message on) is looked up
    only when another session in scope has messages there; else it could find only the
    current conversation's own, all left out."""
    async with PgDatabase(pg_database) as db:
        await db.migrate(SESSION_MIGRATIONS)
        lines = _session("old", "5", "private", 1_700_000_000, 6)
        lines += _session("now", "5", "private", 1_700_100_000, 40)  # the current one
        await import_lines(db, io.BytesIO("".join(x + "\n" for x in lines).encode()))
        async with db.connection() as conn:
            cur = await conn.execute("SELECT external_id, id FROM sessions")
            ids = {str(name): int(i) for name, i in await cur.fetchall()}
        roots, texts = await _search_kiwi(pg_database, ids["now"])
        assert roots == [ids["old"]]
        assert not [t for t in texts if "c.id >= %s" in t], texts  # its own: not read
        group = _session("group", "-77", "group", 1_700_200_000, 2)  # in scope, newer
        await import_lines(db, io.BytesIO("".join(x + "\n" for x in group).encode()))
        async with db.connection() as conn:
            cur = await conn.execute("SELECT id FROM sessions WHERE external_id = 'group'")
            row = await cur.fetchone()
    roots, texts = await _search_kiwi(pg_database, ids["now"])
    assert row is not None and sorted(roots) == sorted([ids["old"], int(row[0])])
    assert [t for t in texts if "c.id >= %s" in t]


def _rows_read(plan: dict[str, Any]) -> int:
    """The rows every node of an EXPLAIN ANALYZE plan returned, summed over its loops."""
    own = int(plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1))
    return own + sum(_rows_read(child) for child in plan.get("Plans", []))


async def test_the_lineage_floor_reads_no_more_of_a_longer_conversation(
    pg_database: str,
) -> None:
    """The floor (the conversation's first message id) is each session's own min, one
    index entry, not the min over every message of the lineage: recall's first statement
    costs a conversation of 400 messages what it costs one of 4."""
    async with PgDatabase(pg_database) as db:
        await db.migrate(SESSION_MIGRATIONS)
        lines = _session("old", "5", "private", 1_700_000_000, 6)
        lines += _session("short", "5", "private", 1_700_100_000, 4)
        lines += _session("long", "5", "private", 1_700_200_000, 400)
        await import_lines(db, io.BytesIO("".join(x + "\n" for x in lines).encode()))
        read = {}
        async with db.connection() as conn:
            cur = await conn.execute("SELECT external_id, id FROM sessions")
            ids = {str(name): int(i) for name, i in await cur.fetchall()}
            for name in ("short", "long"):
                options = SearchOptions(exclude_lineage_of=ids[name])
                where = ScopeFilter.build(POSTGRES, SearchScope(PERSON, "5"), options)
                text, params = lineage_floor(POSTGRES, where)
                cur = await conn.execute(("EXPLAIN (ANALYZE, FORMAT JSON) " + text).encode(),
                                         params)  # fmt: skip
                row = await cur.fetchone()
                assert row is not None
                read[name] = _rows_read(row[0][0]["Plan"])
    assert read["long"] <= read["short"], read  # the short one's check meets the long one

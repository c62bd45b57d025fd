"""A search's per-term statements travel together: one round trip for every term's.

Each term of a query is looked up by its own statements (two when the current
conversation is left out: its newer and its older matches). Sent one by one,
a query of eight words waited for the server sixteen times and more; in
psycopg's pipeline mode they all go in one round trip, and the prefix retries of
the words that found nothing in a second one. The statements and the results
are the same (tests/memory_core/pg/test_search_contract.py).
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
    piped = conn.sent.count(True)
    alone = conn.sent.count(False)
    assert piped >= 2 * len(WORDS) + 2, conn.sent  # newer and older, per term and retry
    assert conn.pipelines == 2  # the terms, then the retry of the one with no hit
    assert alone <= 5, conn.sent  # the lineage floor, then what ranks and shows the hits


def _session(name: str, chat: str, chat_type: str, start: int, count: int) -> list[str]:
    lines = []
    for n in range(count):
        record = {"session": name, "user": PERSON, "platform": "telegram", "chat": chat,
                  "chat_type": chat_type, "role": "user" if n % 2 == 0 else "assistant",
                  "content": f"kiwi jam {n} of {name}", "timestamp": start + n * 60}  # fmt: skip
        lines.append(json.dumps(record))
    return lines


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

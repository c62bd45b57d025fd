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
    pipelines: int

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self.sent.append(self._pipeline is not None)
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
        conn.sent, conn.pipelines = [], 0
        found = await search_sessions(conn, scope, query, options)
    assert found, "the person's history matches"
    piped = conn.sent.count(True)
    alone = conn.sent.count(False)
    assert piped >= 2 * len(WORDS) + 2, conn.sent  # newer and older, per term and retry
    assert conn.pipelines == 2  # the terms, then the retry of the one with no hit
    assert alone <= 5, conn.sent  # the lineage floor, then what ranks and shows the hits

"""Search plans on PostgreSQL: never a generic plan, search indexes rebuilt after bulk loads.

A search statement run more often than psycopg's prepare threshold on one
connection would be prepared, and the server would soon keep a generic plan
for it, blind to the term and the person (100 ms and more for a common word of
a person with a long history). Search statements are sent unprepared: after
many searches of one heavy person on one connection, the server holds none of
them as a prepared statement. A bulk import or a move leaves the search
indexes as one pass builds them: the same size as after a REINDEX, with no
pending entries left for every search to read.
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.database import PgDatabase
from memory_core.pg.session_import import SEARCH_INDEXES, import_lines
from memory_core.pg.session_search import search_sessions
from memory_core.pg.sessions_schema import SESSION_MIGRATIONS
from memory_core.scopes import SearchScope
from memory_core.sessions import SessionDB
from memory_core.sessions.models import SearchOptions
from memory_core.transfer import migrate_storage

HEAVY, LIGHT = "telegram-1001", "telegram-2002"
WORDS = ("deploy", "rollback", "release", "staging", "canary",
         "pipeline", "garden", "tomato", "compost", "soil")  # fmt: skip


def history(messages: int, sessions: int = 40, prefix: str = "s") -> list[str]:
    """`messages` lines of the heavy person over `sessions` sessions, and a few of another."""
    lines = []
    for n in range(messages):
        user = LIGHT if n % 25 == 0 else HEAVY
        words = " ".join(WORDS[(n * k) % len(WORDS)] for k in (1, 3, 7))
        record = {"session": f"{prefix}{n % sessions}-{user}", "user": user, "platform": "telegram",
                  "chat": user.split("-")[1], "chat_type": "private",
                  "role": "user" if n % 2 == 0 else "assistant",
                  "content": f"the {words} number {n}",
                  "timestamp": 1_700_000_000 + n * 60}  # fmt: skip
        lines.append(json.dumps(record))
    return lines


@pytest.fixture
async def heavy_db(pg_database: str) -> AsyncIterator[PgDatabase]:
    async with PgDatabase(pg_database) as db:
        await db.migrate(SESSION_MIGRATIONS)
        data = "".join(line + "\n" for line in history(3000)).encode()
        await import_lines(db, io.BytesIO(data))
        yield db


async def test_search_statements_are_never_prepared(heavy_db: PgDatabase, pg_database: str) -> None:
    scope = SearchScope(user_key=HEAVY, chat_id="1001")
    options = SearchOptions(limit=4, max_hits_per_term=500, snippets_per_hit=2,
                            exclude_lineage_of=10_000_000)  # fmt: skip
    async with await psycopg.AsyncConnection.connect(pg_database, autocommit=True) as conn:
        threshold = conn.prepare_threshold or 0
        found = [await search_sessions(conn, scope, "the deploy canary", options)
                 for _ in range(threshold + 5)]  # fmt: skip
        cur = await conn.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in await cur.fetchall()]
    assert found[0], "the heavy person's history matches"
    assert all(hits == found[0] for hits in found)
    assert not [s for s in prepared if "messages" in s or "sessions" in s], prepared


async def index_sizes(db: PgDatabase, rebuild: bool = False) -> dict[str, int]:
    async with db.connection() as conn:
        if rebuild:
            for index in SEARCH_INDEXES:
                await conn.execute(f"REINDEX INDEX {index}".encode())
        cur = await conn.execute(
            "SELECT relname, pg_relation_size(oid) FROM pg_class "
            "WHERE oid = ANY(%s::regclass[]) ORDER BY relname",
            (list(SEARCH_INDEXES),),
        )
        return {str(name): int(size) for name, size in await cur.fetchall()}


async def test_an_import_leaves_the_search_indexes_as_built_in_one_pass(
    heavy_db: PgDatabase,
) -> None:
    imported = await index_sizes(heavy_db)
    assert imported == await index_sizes(heavy_db, rebuild=True)
    async with heavy_db.connection() as conn:  # the planner knows the rows
        cur = await conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'messages'::regclass")
        row = await cur.fetchone()
    assert row is not None and row[0] == 3000


async def test_a_small_import_merges_its_pending_entries(heavy_db: PgDatabase) -> None:
    data = "".join(line + "\n" for line in history(100, prefix="t")).encode()
    result = await import_lines(heavy_db, io.BytesIO(data))
    assert result.messages_inserted == 100
    async with heavy_db.connection() as conn:  # nothing left to merge
        for index in SEARCH_INDEXES:
            cur = await conn.execute("SELECT gin_clean_pending_list(%s::regclass)", (index,))
            assert await cur.fetchone() == (0,)


async def test_a_move_leaves_the_search_indexes_as_built_in_one_pass(
    pg_database: str, tmp_path: Path
) -> None:
    with SessionDB(tmp_path / "state.db") as source:
        source.import_lines(history(3000))
    with PgSyncDatabase(pg_database, max_size=1) as target:
        assert migrate_storage(tmp_path, target).ok
    async with PgDatabase(pg_database) as db:
        moved = await index_sizes(db)
        assert moved == await index_sizes(db, rebuild=True)


def test_psycopg_would_prepare_a_repeated_statement(pg_database: str) -> None:
    """What the first test guards against: a statement run past the threshold is prepared."""
    with psycopg.connect(pg_database, autocommit=True) as conn:
        for _ in range((conn.prepare_threshold or 0) + 1):
            conn.execute("SELECT count(*) FROM pg_class WHERE relname = %s", ("x",))
        rows = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    assert any("pg_class" in row[0] for row in rows)

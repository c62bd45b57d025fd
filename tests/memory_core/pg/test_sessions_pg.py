"""PgSessionStore beyond the contract: concurrent appends, the search columns, message counts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from memory_core.pg.database import PgDatabase
from memory_core.pg.search_text import index_document
from memory_core.pg.sessions import PgSessionStore
from memory_core.scopes import SearchScope
from tests.memory_core.sessions.helpers import message, origin

ALICE = "telegram-1001"


@pytest.fixture
async def db(pg_database: str) -> AsyncIterator[PgDatabase]:
    async with PgDatabase(pg_database, max_size=6) as database:
        yield database


async def _rows(db: PgDatabase, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    async with db.connection() as conn:
        return await (await conn.execute(sql.encode(), params)).fetchall()


async def test_concurrent_appends_to_one_new_session_keep_one_session_and_no_duplicate(
    db: PgDatabase,
) -> None:
    # Two stores on one pool stand for two processes: each append is its own transaction
    # on its own connection, so they race on creating the session and on the same keys.
    first, second = PgSessionStore(db), PgSessionStore(db)
    await first.open()
    await second.open()
    turns = [[message(f"m{n}", float(n), key=f"t:{n}")] for n in range(12)]
    results = await asyncio.gather(
        *(
            s.append_messages(origin=origin(ALICE), messages=t)
            for t in turns
            for s in (first, second)
        )
    )
    assert len({r.session_id for r in results}) == 1
    assert sum(r.inserted for r in results) == 12
    assert sum(r.session_created for r in results) == 1
    session_id = results[0].session_id
    stored = await first.get_messages(session_id, SearchScope(ALICE))
    assert [m.content for m in stored] == [f"m{n}" for n in range(12)]
    counted = await _rows(db, "SELECT message_count FROM sessions WHERE id = %s", (session_id,))
    assert counted == [(12,)]
    by_key = {r.message_ids[0] for r in results}
    assert by_key == {m.id for m in stored}  # both writers of a key got its one id


async def test_messages_carry_their_words_and_symbols(db: PgDatabase) -> None:
    store = PgSessionStore(db)
    await store.open()
    await store.append_messages(
        origin=origin(ALICE),
        messages=[
            message("deploy failed 🚀", 1),
            message("🚀 tool output", 2, role="tool"),
            message("", 3, role="assistant"),
            message("nul\x00byte", 4),
        ],
    )
    rows = await _rows(db, "SELECT role, content, words::text, symbols FROM messages ORDER BY id")
    assert rows[0][3] == "deploy failed 🚀" and rows[1][3] is None and rows[2][3] is None
    expected = index_document("user", "deploy failed 🚀", 1, None)
    assert expected is not None
    same = await _rows(db, "SELECT %s::tsvector::text", (expected,))
    assert rows[0][2] == same[0][0]
    assert rows[2][2] is None  # nothing to index
    assert rows[3][1] == "nul\ufffdbyte"  # PostgreSQL text cannot hold NUL

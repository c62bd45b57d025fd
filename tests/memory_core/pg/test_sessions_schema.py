"""The "sessions" schema on PostgreSQL: idempotent migration, counts kept by triggers."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg import errors

from memory_core.pg.database import PgDatabase
from memory_core.pg.sessions_schema import COMPONENT, SESSION_MIGRATIONS


async def _rows(db: PgDatabase, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    async with db.connection() as conn:
        return await (await conn.execute(sql.encode(), params)).fetchall()


async def test_migrating_twice_leaves_one_schema_and_counts_messages(pg_database: str) -> None:
    async with PgDatabase(pg_database, max_size=2) as db:
        assert await db.migrate(SESSION_MIGRATIONS) == {COMPONENT: 1}
        assert await db.migrate(SESSION_MIGRATIONS) == {COMPONENT: 1}
        recorded = await _rows(db, "SELECT version FROM mnemo_schema WHERE component = 'sessions'")
        assert recorded == [(1,)]
        (session_id,) = (
            await _rows(
                db,
                "INSERT INTO sessions (source, user_key, owner_token, chat_id, chat_type, "
                "started_at) VALUES ('telegram', 'telegram-1', 'tok', '1', 'private', 1.0) "
                "RETURNING id",
            )
        )[0]
        await _rows(
            db,
            "INSERT INTO messages (session_id, role, content, timestamp, dedupe_key) "
            "VALUES (%s, 'user', 'a', 1, 'k1'), (%s, 'user', 'b', 2, 'k2') RETURNING id",
            (session_id, session_id),
        )
        await _rows(
            db,
            "INSERT INTO messages (session_id, role, content, timestamp, dedupe_key) "
            "VALUES (%s, 'user', 'again', 3, 'k1') ON CONFLICT DO NOTHING RETURNING id",
            (session_id,),
        )
        count = "SELECT message_count FROM sessions WHERE id = %s"
        assert await _rows(db, count, (session_id,)) == [(2,)]
        await _rows(db, "DELETE FROM messages WHERE dedupe_key = 'k2' RETURNING id")
        assert await _rows(db, count, (session_id,)) == [(1,)]
        with pytest.raises(errors.RaiseException, match="owner of a session"):
            await _rows(db, "UPDATE sessions SET user_key = 'x' RETURNING id")

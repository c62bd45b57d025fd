"""The "sessions" schema on PostgreSQL: idempotent migration, counts kept by triggers, and
v2's words given to every stored message."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg import errors

from memory_core.pg.database import PgDatabase
from memory_core.pg.session_rows import check_rows
from memory_core.pg.sessions_schema import COMPONENT, FILL_BATCH, SESSION_MIGRATIONS
from memory_core.sessions.word_index import owner_token


async def _rows(db: PgDatabase, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    async with db.connection() as conn:
        return await (await conn.execute(sql.encode(), params)).fetchall()


async def test_migrating_twice_leaves_one_schema_and_counts_messages(pg_database: str) -> None:
    async with PgDatabase(pg_database, max_size=2) as db:
        assert await db.migrate(SESSION_MIGRATIONS) == {COMPONENT: 5}
        assert await db.migrate(SESSION_MIGRATIONS) == {COMPONENT: 5}
        recorded = await _rows(db, "SELECT version FROM mnemo_schema WHERE component = 'sessions'")
        assert recorded == [(1,), (2,), (3,), (4,), (5,)]
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


async def test_version_2_gives_every_stored_message_its_date_and_speaker(
    pg_database: str,
) -> None:
    """v1's rows (words of the text alone, or none) get their words again, in batches."""
    rows = FILL_BATCH + 3
    async with PgDatabase(pg_database, max_size=2) as db:
        assert await db.migrate(SESSION_MIGRATIONS[:1]) == {COMPONENT: 1}
        await _rows(
            db,
            "INSERT INTO sessions (id, source, user_key, owner_token, chat_id, chat_type, "
            "started_at, root_id) VALUES (1, 'telegram', 'telegram-1', %s, '-5', 'group', 1, 1) "
            "RETURNING id",
            (owner_token("telegram-1"),),
        )
        await _rows(
            db,
            "INSERT INTO messages (session_id, role, content, timestamp, speaker_name, words) "
            "SELECT 1, 'user', 'message ' || n, 1683504000 + n * 10, "
            "CASE WHEN n %% 2 = 0 THEN 'Caroline' END, 'message'::tsvector "
            "FROM generate_series(1, %s) AS n RETURNING id",
            (rows,),
        )
        assert (await check_rows(db))["message words"] == rows
        assert await db.migrate(SESSION_MIGRATIONS) == {COMPONENT: 5}
        assert (await check_rows(db))["message words"] == 0
        caroline = "SELECT count(*) FROM messages WHERE words @@ 'carolin'::tsquery"
        assert await _rows(db, caroline) == [(rows // 2,)]
        monday = "SELECT count(*) FROM messages WHERE words @@ 'lune & mayo & 2023'::tsquery"
        assert await _rows(db, monday) == [(rows,)]  # all on Monday 8 May 2023


async def test_version_3_marks_what_the_old_rule_found_unanswered(pg_database: str) -> None:
    """Only an open session's newest message, a person's without a fault line, is marked;
    the query of the marked rows reads their partial index."""
    async with PgDatabase(pg_database, max_size=2) as db:
        assert await db.migrate(SESSION_MIGRATIONS[:2]) == {COMPONENT: 2}
        for session_id, ended in ((1, None), (2, None), (3, 2.0), (4, None)):
            await _rows(
                db,
                "INSERT INTO sessions (id, source, user_key, owner_token, chat_id, chat_type, "
                "started_at, ended_at, root_id) "
                "VALUES (%s, 'telegram', %s, 'tok', %s, 'private', 1, %s, %s) RETURNING id",
                (session_id, f"telegram-{session_id}", str(session_id), ended, session_id),
            )
        rows = [  # (session, role, content, notice)
            (1, "user", "answered", None),
            (1, "assistant", "reply", None),
            (1, "user", "owed", None),
            (2, "user", "owed but hidden", None),
            (2, "user", "newest, failed", "(the model failed)"),
            (3, "user", "ended", None),
            (4, "user", "q", None),
            (4, "assistant", "a", None),
        ]
        for n, (session_id, role, content, notice) in enumerate(rows, start=1):
            await _rows(
                db,
                "INSERT INTO messages (session_id, role, content, timestamp, dedupe_key, notice) "
                "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (session_id, role, content, 1000.0 + n, f"v2:{n}", notice),
            )
        assert await db.migrate(SESSION_MIGRATIONS) == {COMPONENT: 5}
        marked = "SELECT content FROM messages WHERE unanswered ORDER BY id"
        assert await _rows(db, marked) == [("owed",)]
        async with db.connection() as conn:
            await conn.execute(b"SET enable_seqscan = off")  # as with millions of rows
            plan = await (
                await conn.execute(
                    b"EXPLAIN SELECT max(id) FROM messages WHERE session_id = 1 AND unanswered"
                )
            ).fetchall()
            await conn.execute(b"RESET enable_seqscan")
        assert "messages_unanswered" in " ".join(str(row[0]) for row in plan)

"""Importing JSON Lines into PostgreSQL: the same result and the same export as SQLite's import."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory_core.errors import ImportFormatError, SessionStoreBusyError
from memory_core.pg.database import PgDatabase
from memory_core.pg.search_text import index_document
from memory_core.pg.session_import import IMPORT_LOCK, import_lines, symbols_value
from memory_core.pg.sessions_schema import SESSION_MIGRATIONS
from memory_core.sessions import ImportResult, SessionDB
from memory_core.sessions.jsonl import EXPORT_COLUMNS, EXPORT_ORDER, export_line

ALICE, BOB = "telegram-1001", "discord-2002"


def line(session: str, user: str, role: str, content: str, ts: float, **more: Any) -> str:
    platform = user.split("-")[0]
    record = {"session": session, "user": user, "platform": platform,
              "chat": more.pop("chat", user), "chat_type": more.pop("chat_type", "private"),
              "role": role, "content": content, "timestamp": ts, **more}  # fmt: skip
    return json.dumps(record, ensure_ascii=False)


LINES = [
    line("a1", ALICE, "user", "Booked the ferry to Hydra for Friday", 1_700_000_000.5),
    line("a1", ALICE, "assistant", "Noted: the ferry leaves at 7:40 🚢⛴", 1_700_000_010.25),
    line("a1", ALICE, "assistant", "", 1_700_000_011, tool_calls='[{"id": "c1"}]'),
    line("a1", ALICE, "tool", "x" * 9000, 1_700_000_012, tool_name="web", tool_call_id="c1"),
    line(
        "g1",
        ALICE,
        "user",
        "服务器部署失败了 again",
        1_700_000_100,
        chat="-100",
        chat_type="group",
        name="Ann",
    ),
    line("b1", BOB, "user", "Dinner with mum on Sunday ☕", "2023-11-14T22:20:00+00:00"),
    line("a1", ALICE, "user", "And back on Sunday", 1_699_999_990),  # earlier than the rest
]


async def pg_export(db: PgDatabase, user_key: str) -> list[str]:
    async with db.connection() as conn:
        cur = await conn.execute(
            f"SELECT {EXPORT_COLUMNS} FROM sessions s JOIN messages m ON m.session_id = s.id "
            f"WHERE s.user_key = %s ORDER BY {EXPORT_ORDER}",
            (user_key,),
        )
        return [export_line(row) for row in await cur.fetchall()]


async def counts(db: PgDatabase) -> tuple[int, int]:
    async with db.connection() as conn:
        cur = await conn.execute("SELECT (SELECT count(*) FROM sessions), count(*) FROM messages")
        row = await cur.fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


@pytest.fixture
async def pg(pg_database: str) -> AsyncIterator[PgDatabase]:
    async with PgDatabase(pg_database, max_size=3) as db:
        await db.migrate(SESSION_MIGRATIONS)
        yield db


def sqlite_import(path: Path, lines: list[str]) -> tuple[ImportResult, dict[str, list[str]]]:
    with SessionDB(path) as db:
        result = db.import_lines(lines)
        return result, {user: list(db.export_lines(user)) for user in (ALICE, BOB)}


async def test_an_import_exports_as_it_does_from_sqlite(pg: PgDatabase, tmp_path: Path) -> None:
    expected, exports = sqlite_import(tmp_path / "state.db", LINES)
    result = await import_lines(pg, LINES, chunk_rows=2)  # several chunks, sessions across them
    assert result == expected == ImportResult(7, 3, 0, 7, 0)
    assert {user: await pg_export(pg, user) for user in (ALICE, BOB)} == exports
    async with pg.connection() as conn:
        cur = await conn.execute(
            "SELECT m.role, m.content, m.words::text, m.symbols, s.message_count, "
            "(SELECT count(*) FROM messages WHERE session_id = s.id), s.root_id = s.id, "
            "s.end_reason, s.started_at, s.ended_at, "
            "(SELECT min(timestamp) FROM messages WHERE session_id = s.id), "
            "(SELECT max(timestamp) FROM messages WHERE session_id = s.id), "
            "m.timestamp, m.speaker_name "
            "FROM messages m JOIN sessions s ON s.id = m.session_id ORDER BY m.id"
        )
        rows = await cur.fetchall()
    assert len(rows) == 7
    async with pg.connection() as conn:
        for role, content, words, symbols, count, real, rooted, reason, *bounds in rows:
            *bounds, timestamp, speaker = bounds
            want = index_document(role, content, timestamp, speaker)
            found = await (await conn.execute("SELECT %s::tsvector::text", (want,))).fetchone()
            assert words == (found[0] if found else None)
            assert symbols == symbols_value(role, content)
            assert (count, rooted, reason) == (real, True, "imported")
            assert bounds[:2] == bounds[2:]  # a session spans its messages
    assert sum(symbols is not None for _, _, _, symbols, *_ in rows) == 2  # the emoji lines
    assert sum("'ann':" in (r[2] or "") for r in rows) == 1  # the speaker's name, lowercased


async def test_an_import_again_adds_nothing_and_extends_as_sqlite(
    pg: PgDatabase, tmp_path: Path
) -> None:
    more = [line("a1", ALICE, "user", "One more thing", 1_700_000_500)]
    sqlite_import(tmp_path / "state.db", LINES[:4])
    expected, exports = sqlite_import(tmp_path / "state.db", LINES + more)
    await import_lines(pg, LINES[:4])
    result = await import_lines(pg, LINES + more, chunk_rows=3)
    assert result == expected == ImportResult(8, 2, 1, 4, 4)
    assert {user: await pg_export(pg, user) for user in (ALICE, BOB)} == exports
    async with pg.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM sessions s WHERE message_count != "
            "(SELECT count(*) FROM messages WHERE session_id = s.id)"
        )
        assert await cur.fetchone() == (0,)
    again = await import_lines(pg, [*LINES, *more])
    assert again == ImportResult(8, 0, 3, 0, 8)


async def test_a_bad_line_leaves_nothing(pg: PgDatabase, tmp_path: Path) -> None:
    bad = [*LINES, '{"session": "a1"']
    with pytest.raises(ImportFormatError) as in_sqlite:
        sqlite_import(tmp_path / "state.db", bad)
    with pytest.raises(ImportFormatError) as in_pg:
        await import_lines(pg, bad, chunk_rows=2)  # after rows were copied
    assert str(in_pg.value) == str(in_sqlite.value)
    assert await counts(pg) == (0, 0)
    clash = [*LINES, line("a1", ALICE, "user", "elsewhere", 1, chat="-5", chat_type="group")]
    with pytest.raises(ImportFormatError, match="line 8: session 'a1' is in chat"):
        await import_lines(pg, clash)
    assert await counts(pg) == (0, 0)


async def test_one_import_at_a_time(pg: PgDatabase) -> None:
    async with pg.connection() as other:
        await other.execute("SELECT pg_advisory_lock(%s)", (IMPORT_LOCK,))
        with pytest.raises(SessionStoreBusyError):
            await import_lines(pg, LINES)
        await other.execute("SELECT pg_advisory_unlock(%s)", (IMPORT_LOCK,))
    assert await counts(pg) == (0, 0)
    assert (await import_lines(pg, LINES)).messages_inserted == 7


async def test_exported_sessions_of_the_bot_are_found_in_one_batch(pg: PgDatabase) -> None:
    """Sessions the bot made (no external id) come back under `bot_session_id`: several
    in one batch, with a new one beside them, are found and extended, none twice."""
    from memory_core.sessions.jsonl import bot_session_id

    async with pg.transaction() as conn:
        made = []
        for n, started in enumerate((1_700_000_000.25, 1_700_100_000.5)):
            cur = await conn.execute(
                "INSERT INTO sessions (source, user_key, owner_token, chat_id, chat_type, "
                "started_at) VALUES ('telegram', %s, 'x', %s, 'private', %s) RETURNING id",
                (ALICE, ALICE, started),
            )
            row = await cur.fetchone()
            assert row is not None
            made.append(bot_session_id(int(row[0]), started))
            await conn.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) "
                "VALUES (%s, 'user', %s, %s)",
                (row[0], f"stored {n}", started),
            )
    lines = [
        line(made[0], ALICE, "user", "stored 0", 1_700_000_000.25),  # already there
        line(made[0], ALICE, "assistant", "a reply", 1_700_000_005),
        line(made[1], ALICE, "user", "stored 1", 1_700_100_000.5),  # already there
        line("elsewhere", ALICE, "user", "a new one", 1_700_200_000),
        line(made[1], ALICE, "assistant", "another reply", 1_700_100_009),
    ]
    assert await import_lines(pg, lines) == ImportResult(5, 1, 2, 3, 2)
    assert await counts(pg) == (3, 5)
    assert await import_lines(pg, lines) == ImportResult(5, 0, 3, 0, 5)


async def index_definitions(db: PgDatabase) -> list[str]:
    async with db.connection() as conn:
        cur = await conn.execute(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index "
            "WHERE indrelid = 'messages'::regclass ORDER BY 1"
        )
        return [str(row[0]) for row in await cur.fetchall()]


async def test_into_an_empty_table_the_indexes_are_built_after_the_load(
    pg: PgDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_core.pg import session_import

    before = await index_definitions(pg)
    dropped: list[list[str]] = []

    async def build(conn: Any, definitions: list[str]) -> None:
        dropped.append(definitions)
        async with conn.cursor() as cur:  # the load is done: none of them is there
            await cur.execute(
                "SELECT count(*) FROM pg_index WHERE indrelid = 'messages'::regclass "
                "AND NOT indisunique"
            )
            assert await cur.fetchone() == (0,)
        await built(conn, definitions)

    built = session_import._build_indexes
    monkeypatch.setattr(session_import, "_build_indexes", build)
    with pytest.raises(ImportFormatError):  # a bad line: the drop is undone with the rest
        await import_lines(pg, [*LINES, "{"], chunk_rows=2)
    assert await index_definitions(pg) == before and dropped == []
    await import_lines(pg, LINES, chunk_rows=2)
    assert await index_definitions(pg) == before
    assert any("USING gin (words)" in d for d in dropped[0]) and len(dropped) == 1
    await import_lines(pg, [line("a2", ALICE, "user", "more", 1_700_000_900)])
    assert len(dropped) == 1  # the table holds rows: its indexes stay
    async with pg.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM messages WHERE words @@ 'ferri'")
        assert await cur.fetchone() == (2,)


async def test_an_empty_table_in_use_keeps_its_indexes(
    pg: PgDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_core.pg import session_import

    monkeypatch.setattr(session_import, "DEFER_LOCK_WAIT", "100ms")
    before = await index_definitions(pg)
    async with pg.connection() as reader:
        await reader.execute("BEGIN")
        await reader.execute("LOCK TABLE messages IN ACCESS SHARE MODE")  # as a reader does
        result = await import_lines(pg, LINES)
        await reader.execute("ROLLBACK")
    assert result.messages_inserted == 7
    assert await index_definitions(pg) == before
    async with pg.connection() as conn:
        cur = await conn.execute("SHOW lock_timeout")
        assert await cur.fetchone() == ("0",)


async def test_words_made_in_worker_processes_are_the_same(
    pg: PgDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_core.pg import import_words

    monkeypatch.setattr(import_words, "POOL_MIN_ROWS", 2)
    monkeypatch.setattr(import_words, "workers", lambda: 2)
    started: list[object] = []
    real_start = import_words._start

    async def start() -> Any:
        worker = await real_start()
        started.append(worker)
        return worker

    monkeypatch.setattr(import_words, "_start", start)
    await import_lines(pg, LINES, chunk_rows=3)
    assert len(started) == 2  # both asked, for each full chunk
    async with pg.connection() as conn:
        cur = await conn.execute(
            "SELECT role, content, timestamp, speaker_name, words::text FROM messages ORDER BY id"
        )
        rows = await cur.fetchall()
        for role, content, ts, speaker, words in rows:
            want = index_document(role, content, ts, speaker)
            found = await (await conn.execute("SELECT %s::tsvector::text", (want,))).fetchone()
            assert words == (found[0] if found else None)
    assert all(w.process.returncode == 0 for w in started)  # type: ignore[attr-defined]

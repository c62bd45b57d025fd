"""Moving a filled SQLite data directory into PostgreSQL, and checking both backends."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from memory_core.errors import PostgresError, SessionStoreError
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.database import PgDatabase
from memory_core.pg.sessions_schema import SESSION_MIGRATIONS
from memory_core.sessions import CounterUpdate, NewMessage, SessionDB, SessionOrigin, dump
from memory_core.sessions.inbox import queue
from memory_core.transfer import (
    StorePart,
    check_storage_pg,
    check_storage_sqlite,
    migrate_storage,
    session_digest,
)

ALICE = "telegram-1001"
ORIGIN = SessionOrigin("telegram:1001", "telegram", ALICE, "1001", "private")


def fill(home: Path) -> None:
    """A data directory as a bot leaves it: imported history, a live session with its
    prompt, counters, a child session, a forwarded message, a notice, a queued message."""
    lines = [
        json.dumps({"session": f"s{n}", "user": ALICE, "platform": "telegram", "chat": "1001",
                    "chat_type": "private", "role": role, "content": text, "timestamp": ts})
        for n, role, text, ts in [(1, "user", "the ferry to Hydra 🚢", 1_700_000_000.125),
                                  (1, "assistant", "服务器部署 noted", 1_700_000_001),
                                  (2, "user", "dinner on Sunday", 1_700_100_000)]
    ]  # fmt: skip
    with SessionDB(home / "state.db", clock=lambda: 1_700_200_100.5) as db:
        db.import_lines(lines)
        first = db.append_messages(
            origin=ORIGIN,
            messages=[NewMessage("user", "remind me of the ferry", 1_700_200_000.25, key="t1:0"),
                      NewMessage("user", "a forwarded note", 1_700_200_001, key="t1:1",
                                 own_words=False),
                      NewMessage("assistant", "Sure.", 1_700_200_002, key="t1:2")],
            counters=CounterUpdate(turns=3, steps=2),
        )  # fmt: skip
        db.conn.execute("UPDATE messages SET notice = 'model fault' WHERE id = ?",
                        (first.message_ids[2],))  # fmt: skip
        db.conn.execute("UPDATE sessions SET extracted_through = ?, extraction_due = 1 "
                        "WHERE id = ?", (first.message_ids[0], first.session_id))  # fmt: skip
        child = db.start_child_session(first.session_id, model="m1", title="compressed")
        db.set_system_prompt(child, "You are Mnemo.\n\nUSER.md: likes ferries")
        queue(db.conn, "telegram:1001", ALICE, "telegram", '{"text": "waiting"}', 1_700_200_050.0)


def tree_digest(home: Path) -> dict[str, str]:
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
async def target(pg_database: str) -> AsyncIterator[PgDatabase]:
    async with PgDatabase(pg_database, max_size=3) as db:
        yield db


@pytest.fixture
def into(pg_database: str) -> Iterator[PgSyncDatabase]:
    """The same database for the move (blocking: the stores it fills are)."""
    with PgSyncDatabase(pg_database, max_size=1) as db:
        yield db


class ListPart:
    """A store part over two lists (a fake memory: the real ones have their own tests)."""

    def __init__(self, source: list[str]) -> None:
        self.source, self.target = source, list[str]()

    def part(self) -> StorePart:
        def digest(items: list[str]) -> str:
            return hashlib.sha256("\n".join(items).encode()).hexdigest()

        def copy() -> dict[str, int]:
            self.target.extend(self.source)
            return {"items": len(self.source)}

        return StorePart("list", lambda: not self.target, copy,
                         lambda: digest(self.source), lambda: digest(self.target))  # fmt: skip


async def test_a_move_copies_every_row_and_leaves_the_source_untouched(
    tmp_path: Path, target: PgDatabase, into: PgSyncDatabase
) -> None:
    fill(tmp_path)
    before = tree_digest(tmp_path)
    conn = dump.open_readonly(tmp_path / "state.db")
    source_rows = [
        (t, r) for t in ("sessions", "messages", "inbox") for r in dump.table_rows(conn, t)
    ]
    conn.close()
    lines: list[str] = []
    extra = ListPart(["a", "b"])
    report = migrate_storage(tmp_path, into, lambda _db: [extra.part()], echo=lines.append)
    assert report.ok, report
    assert tree_digest(tmp_path) == before  # not a byte of the data directory changed
    sessions = report.parts[0]
    assert sessions.target_counts == {"sessions": 4, "messages": 6, "inbox": 1}
    assert sessions.source_digest == sessions.target_digest == session_digest(source_rows)
    assert [p.name for p in report.parts] == ["sessions", "list"] and extra.target == ["a", "b"]
    assert len(lines) == 2 and lines[0].startswith("ok   sessions: 4 sessions, 6 messages")
    async with target.connection() as pg:
        prompt = await (await pg.execute("SELECT system_prompt, turns_since_memory, "
                                         "steps_since_skill FROM sessions WHERE system_prompt "
                                         "IS NOT NULL")).fetchall()  # fmt: skip
        assert prompt == [("You are Mnemo.\n\nUSER.md: likes ferries", 3, 2)]
        insert = (
            "INSERT INTO sessions (source, user_key, chat_id, chat_type, started_at) "
            "VALUES ('console', 'console-x', 'c', 'private', 1) RETURNING id"
        )
        new = await (await pg.execute(insert)).fetchone()
        assert new == (5,)  # a live write takes the next id, past the copied ones
        await pg.execute("DELETE FROM sessions WHERE id = 5")
    checked = await check_storage_pg(
        target, SESSION_MIGRATIONS, {"list": extra.part().target_digest}
    )
    assert checked.ok, checked.problems
    assert checked.digests["sessions"] == sessions.source_digest
    assert "message words" in checked.passed
    assert (await check_storage_sqlite(tmp_path)).ok


async def test_a_move_into_a_database_holding_anything_is_refused(
    tmp_path: Path, target: PgDatabase, into: PgSyncDatabase
) -> None:
    fill(tmp_path)
    migrate_storage(tmp_path, into)
    digest = (await check_storage_pg(target, SESSION_MIGRATIONS)).digests["sessions"]
    with pytest.raises(PostgresError, match="already holds inbox, messages, sessions"):
        migrate_storage(tmp_path, into)
    assert (await check_storage_pg(target, SESSION_MIGRATIONS)).digests["sessions"] == digest
    other = tmp_path / "other"
    other.mkdir()
    full = ListPart([])
    full.target.append("x")
    async with target.connection() as pg:
        await pg.execute("TRUNCATE inbox, messages, sessions")
    with pytest.raises(PostgresError, match="already holds list"):
        migrate_storage(other, into, lambda _db: [full.part()])


async def test_a_check_finds_what_is_wrong(
    tmp_path: Path, target: PgDatabase, into: PgSyncDatabase
) -> None:
    fill(tmp_path)
    migrate_storage(tmp_path, into)
    async with target.connection() as pg:
        await pg.execute("UPDATE messages SET words = NULL WHERE id = 1")
        await pg.execute("UPDATE sessions SET message_count = 9 WHERE id = 1")
        await pg.execute("UPDATE mnemo_schema SET sha256 = 'edited' WHERE component = 'sessions'")
    report = await check_storage_pg(target, SESSION_MIGRATIONS, sample=100)
    assert not report.ok
    assert "1 rows with wrong message words" in report.problems
    assert "1 rows with wrong message counts" in report.problems
    assert any("differs from the one this database ran" in p for p in report.problems)
    state = tmp_path / "state.db"
    state.write_bytes(state.read_bytes()[:4096])  # cut short
    assert not (await check_storage_sqlite(tmp_path)).ok


async def test_a_copy_that_differs_or_fails_leaves_the_target_empty(
    tmp_path: Path, target: PgDatabase, into: PgSyncDatabase
) -> None:
    """The move is one transaction: a part whose copy differs from its source, or a
    state.db written while it is read, commits nothing, not even the sessions."""
    fill(tmp_path)
    wrong = ListPart(["a", "b"])
    differs = dataclasses.replace(wrong.part(), target_digest=lambda: "0" * 64)
    report = migrate_storage(tmp_path, into, lambda _db: [differs])
    assert not report.ok and not report.kept
    assert [p.name for p in report.parts if not p.ok] == ["list"]

    def write_meanwhile() -> dict[str, int]:
        with SessionDB(tmp_path / "state.db") as db:
            db.append_messages(origin=ORIGIN, messages=[NewMessage("user", "late", 1.0, key="x")])
        return {}

    writer = StorePart("writer", lambda: True, write_meanwhile, lambda: "", lambda: "")
    with pytest.raises(SessionStoreError, match="changed while it was copied"):
        migrate_storage(tmp_path, into, lambda _db: [writer])
    async with target.connection() as pg:
        for table in ("sessions", "messages", "inbox"):
            row = await (await pg.execute(f"SELECT count(*) FROM {table}")).fetchone()
            assert row == (0,), table
    assert migrate_storage(tmp_path, into).ok  # and a move runs again

"""The mark of a person's message not answered yet (schema v11): what an upgrade marks, and
that finding the marked messages reads the partial index, not the messages."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memory_core.sessions import SessionStore
from memory_core.sessions.chats import unanswered
from memory_core.sessions.connection import connect
from memory_core.sessions.schema import migrate
from memory_core.sessions.writes import append_messages, end_session, start_child_session
from tests.memory_core.sessions.helpers import message, origin


def _v10_database(path: Path) -> None:
    """Sessions as version 10 left them: the old rule found only the open session whose
    newest message is a person's without a fault line (session 1)."""
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=10)
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
    for session_id in (1, 2, 3, 4):
        conn.execute(
            "INSERT INTO sessions(id, source, user_key, owner_token, chat_id, chat_type, "
            "session_key, started_at, ended_at, root_id) "
            "VALUES (?, 'telegram', ?, 'tok', ?, 'private', ?, 1.0, ?, ?)",
            (
                session_id,
                f"telegram-{session_id}",
                str(session_id),
                f"telegram:private:{session_id}:telegram-{session_id}",
                2.0 if session_id == 3 else None,
                session_id,
            ),
        )
    for n, (session_id, role, content, notice) in enumerate(rows, start=1):
        conn.execute(
            "INSERT INTO messages(session_id, role, content, timestamp, dedupe_key, notice) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (session_id, role, content, 1000.0 + n, f"v10:{n}", notice),
        )
    conn.close()


async def test_an_upgrade_marks_what_the_old_rule_found_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _v10_database(path)
    async with SessionStore(path, clock=lambda: 5000.0) as store:
        found = await store.unanswered("telegram", since=0)
        assert [(s.id, m.content) for s, m in found] == [(1, "owed")]
        await store.append_messages(
            origin=origin("telegram-1", "1"), messages=[message("re owed", 1010.0, "assistant")]
        )
        assert await store.unanswered("telegram", since=0) == []


def test_finding_and_answering_read_the_partial_index_only(tmp_path: Path) -> None:
    """Every statement about the mark (the sweep's query, a reply's clearing, an end's,
    a compression's) seeks the partial index of marked rows: none walks a session's
    messages or the open sessions, however many there are."""
    conn = connect(tmp_path / "state.db")
    migrate(conn)
    who = origin("telegram-1", "1")
    first = append_messages(conn, who, [message("m1", 1000.0)])
    append_messages(conn, who, [message("m2", 1001.0, platform_message_id="p2")])
    ran: list[str] = []
    conn.set_trace_callback(ran.append)
    found = unanswered(conn, "telegram", 0.0)
    append_messages(conn, who, [message("re m2", 1002.0, "assistant")])
    child = start_child_session(
        conn, first.session_id, now=2000.0, messages=[message("m1", 1000.0, key="copy")]
    )
    end_session(conn, child, "new", 2001.0)
    conn.set_trace_callback(None)
    assert [m.content for _, m in found] == ["m1", "m2"]
    marked = [sql for sql in ran if "unanswered" in sql and sql.startswith(("SELECT", "UPDATE"))]
    assert len(marked) == 5, ran  # the query, a reply's, the parent's marks, two ends
    for sql in marked:
        plan = " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "INDEX messages_unanswered" in plan, (sql, plan)
        assert "messages_session" not in plan and "sessions_open" not in plan, (sql, plan)
    conn.close()

"""Recall never reads the current conversation's own history (SQLite).

A search that leaves a conversation out (recall: the current one) caps the
matches from that conversation's first message on apart from the older ones
(`matching._fts_hits`). That newer range is looked up only when a session in
scope besides it holds a message from there on: otherwise it could find only
the conversation's own messages, all left out, and a long conversation read
its own history on every turn. The PostgreSQL twin is in
tests/memory_core/pg/test_search_roundtrips.py.
"""

from __future__ import annotations

from pathlib import Path

from memory_core.scopes import SearchScope
from memory_core.sessions import SessionDB
from memory_core.sessions.models import SearchOptions
from tests.memory_core.sessions.helpers import kiwi_session

PERSON = "telegram-5"


def _session(name: str, chat: str, chat_type: str, start: int, count: int) -> list[str]:
    return kiwi_session(PERSON, name, chat, chat_type, start, count)


def _search_kiwi(db: SessionDB, current: int) -> tuple[list[int], list[str]]:
    """The roots found for "kiwi" leaving `current` out, and the statements run."""
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    try:
        found = db.search(
            "kiwi",
            SearchScope(user_key=PERSON, chat_id=None, outside_threads=True),
            SearchOptions(limit=4, max_hits_per_term=5, exclude_lineage_of=current),
        )
    finally:
        db.conn.set_trace_callback(None)
    return [hit.session_id for hit in found], statements


def _ids(db: SessionDB) -> dict[str, int]:
    rows = db.conn.execute("SELECT external_id, id FROM sessions").fetchall()
    return {str(name): int(i) for name, i in rows}


def test_a_long_conversations_own_messages_are_not_read_by_its_recall(tmp_path: Path) -> None:
    with SessionDB(tmp_path / "state.db") as db:
        db.import_lines(
            _session("old", "5", "private", 1_700_000_000, 6)
            + _session("now", "5", "private", 1_700_100_000, 40)  # the current one
        )
        ids = _ids(db)
        roots, statements = _search_kiwi(db, ids["now"])
        assert roots == [ids["old"]]
        assert not [s for s in statements if "rowid >=" in s], statements  # its own: not read
        db.import_lines(_session("group", "-77", "group", 1_700_200_000, 2))  # in scope, newer
        ids = _ids(db)
        roots, statements = _search_kiwi(db, ids["now"])
        assert sorted(roots) == sorted([ids["old"], ids["group"]])
        assert [s for s in statements if "rowid >=" in s]

"""Schema versions: an older database is migrated forward, a newer one refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.errors import SchemaVersionError
from memory_core.scopes import SearchScope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.query import cjk_words
from memory_core.sessions.schema import (
    SCHEMA_VERSION,
    migrate,
    owner_token,
    schema_version,
)
from memory_core.sessions.word_index import cjk_words_sql
from tests.memory_core.sessions.helpers import message, origin


def make_v1_database(path: Path) -> None:
    """A state.db as version 1 wrote it: no trigram index, no lineage roots, no owner column."""
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, target=1) == 1
    conn.executemany(
        "INSERT INTO sessions(id, source, user_key, chat_id, chat_type, started_at, ended_at, "
        "parent_session_id) VALUES (?, 'telegram', ?, ?, 'private', ?, ?, ?)",
        [(1, "telegram-1", "c1", 100.0, 200.0, None), (2, "telegram-1", "c1", 200.0, None, 1),
         (3, "telegram-2", "c2", 150.0, None, None)],
    )  # fmt: skip
    conn.executemany(
        "INSERT INTO messages(session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
        [(1, "user", "we planned the hiking trip 登山计划", 101.0),
         (2, "assistant", "the hiking trip continues", 201.0),
         (3, "user", "hiking alone 登山", 151.0)],
    )  # fmt: skip
    conn.close()


def test_a_version_1_database_is_migrated_and_searchable(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make_v1_database(path)
    with SessionDB(path) as db:
        assert schema_version(db.conn) == SCHEMA_VERSION
        db.check()  # both indexes rebuilt and in sync, counts filled in
        child = db.get_session(2)
        assert child is not None and child.root_id == 1
        hits = db.search("hiking", SearchScope("telegram-1"))
        assert [h.session_id for h in hits] == [1]  # the child resolves to its root
        assert len(hits[0].snippets) == 2
        assert [h.session_id for h in db.search("登山", SearchScope("telegram-1"))] == [1]
        assert [h.session_id for h in db.search("登山计划", SearchScope("telegram-1"))] == [1]
        assert [h.session_id for h in db.search("登山", SearchScope("telegram-2"))] == [3]
        # New writes after the migration are indexed by the new triggers.
        db.append_message(origin=origin("telegram-2", "c2"), message=message("kayak", 300.0))
        assert len(db.search("kayak", SearchScope("telegram-2"))) == 1
        db.check()


def test_every_step_in_turn_reaches_the_same_schema(tmp_path: Path) -> None:
    stepwise = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    for target in range(1, SCHEMA_VERSION + 1):
        assert migrate(stepwise, target=target) == target
    direct = sqlite3.connect(tmp_path / "b.db", isolation_level=None)
    migrate(direct)
    query = "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
    assert stepwise.execute(query).fetchall() == direct.execute(query).fetchall()


def test_migrating_twice_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path):
        pass
    with SessionDB(path) as db:
        assert db.conn.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 1


def test_a_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        db.conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaVersionError, match="newer"):
        SessionDB(path).open()


def test_a_failed_step_leaves_the_previous_version(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=2)
    conn.execute("CREATE INDEX sessions_root ON sessions(source)")  # v3 would create this name
    with pytest.raises(sqlite3.OperationalError, match="already exists"):
        migrate(conn)
    assert schema_version(conn) == 2
    columns = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
    assert "root_id" not in columns  # the half-run step was rolled back


def test_a_version_3_database_gains_empty_prompts_and_zero_counters(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=3)
    conn.execute(
        "INSERT INTO sessions(id, source, user_key, owner_token, chat_id, chat_type, "
        "session_key, started_at, root_id) VALUES "
        "(1, 'telegram', 'telegram-1', 'x', 'c1', 'private', 'k1', 100.0, 1)"
    )
    conn.close()
    with SessionDB(path) as db:
        assert schema_version(db.conn) == SCHEMA_VERSION
        assert db.get_system_prompt(1, SearchScope("telegram-1")) is None
        counters = db.get_counters(1)
        assert counters is not None
        assert (counters.turns_since_memory, counters.steps_since_skill) == (0, 0)
        # The session resumes: it takes a prompt once and keeps it.
        assert db.set_system_prompt(1, "the first prompt") == "the first prompt"
        assert db.set_system_prompt(1, "a later prompt") == "the first prompt"
        db.append_message(origin=origin("telegram-1", "c1", key="k1"), message=message("hi"))
        db.check()


def make_v5_database(path: Path) -> None:
    """A state.db as version 5 left it: CJK runs are single tokens in the word index."""
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, target=5) == 5
    conn.execute(
        "INSERT INTO sessions(id, source, user_key, owner_token, chat_id, chat_type, "
        "started_at, root_id) VALUES (1, 'telegram', 'telegram-1', ?, 'c1', 'private', 1, 1)",
        (owner_token("telegram-1"),),
    )
    conn.executemany(
        "INSERT INTO messages(id, session_id, role, content, timestamp) VALUES (?, 1, ?, ?, ?)",
        [(1, "user", "我女儿的生日是十月三号", 2.0), (2, "assistant", "好的，记住了 noted", 3.0),
         (3, "tool", "部署脚本输出：迁移失败", 4.0), (4, "user", "生日快乐 🎂🎉🎈", 5.0)],
    )  # fmt: skip
    conn.close()


def test_a_version_5_database_is_reindexed_by_cjk_words(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make_v5_database(path)
    with SessionDB(path) as db:
        assert schema_version(db.conn) == SCHEMA_VERSION
        db.check()  # the rebuilt word index agrees with its view
        me = SearchScope("telegram-1")
        assert [h.session_id for h in db.search("女儿生日礼物", me)] == [1]  # not adjacent
        assert [h.session_id for h in db.search("女", me)] == [1]  # one character
        assert [h.session_id for h in db.search("noted", me)] == [1]
        tokens = db.conn.execute(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'content : 儿的'"
        ).fetchone()[0]
        assert tokens == 1

        def trigram(text: str) -> list[tuple[int]]:
            query = "SELECT rowid FROM messages_trigram WHERE messages_trigram MATCH ?"
            return db.conn.execute(query, (f'content : "{text}"',)).fetchall()

        assert trigram("女儿的") == []  # CJK is served by the word index now
        assert trigram("生日快") == trigram("🎂🎉🎈") == [(4,)]  # rows with emoji stay
        assert [h.session_id for h in db.search("🎂🎉🎈", me)] == [1]
        db.append_message(origin=origin(), message=message("部署完成"))
        db.check()


def test_a_connection_without_our_functions_can_check_the_index(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make_v5_database(path)
    with SessionDB(path):
        pass  # migrated to v6
    plain = sqlite3.connect(path, isolation_level=None)  # no mnemo_* functions
    plain.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    plain.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")
    plain.close()
    with SessionDB(path) as db:
        db.check()
        db.delete_user("telegram-1")  # the triggers' "delete" sees the same tokens
        db.check()


_TOKENS: list[sqlite3.Connection] = []


def _tokens(text: str) -> list[str]:
    """The word index's tokens of `text`, in order."""
    if not _TOKENS:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute(
            "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')"
        )
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        _TOKENS.append(conn)
    conn = _TOKENS[0]
    conn.execute("DELETE FROM t")
    conn.execute("INSERT INTO t(rowid, x) VALUES (1, ?)", (text,))
    return [row[0] for row in conn.execute("SELECT term FROM v ORDER BY offset")]


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="部署迁移失败的了 ab,。カタひら한국é😀\x00\n", max_size=40))
def test_the_sql_twin_gives_the_functions_tokens(text: str) -> None:
    conn = _TOKENS[0] if _TOKENS else sqlite3.connect(":memory:")
    in_sql = conn.execute(f"SELECT {cjk_words_sql('?1')}", (text,)).fetchone()[0]
    assert _tokens(in_sql) == _tokens(cjk_words(text))

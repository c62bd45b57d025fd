"""The word index's `about` column (v10): twins, migration, triggers and bulk loads."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.scopes import SearchScope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.schema import SCHEMA_VERSION, migrate, schema_version
from memory_core.sessions.word_index import about_words, about_words_sql, owner_token
from tests.memory_core.sessions.helpers import message, origin

ME = SearchScope("telegram-1")
MONDAY = 1_683_504_000.0 + 10 * 3600  # Monday 8 May 2023, 10:00 UTC
FRIDAY = 1_709_251_200.0 + 10 * 3600  # Friday 1 March 2024
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


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet="ab 部署\x00", max_size=6),
    st.floats(min_value=-4e10, max_value=3e11, allow_nan=False),
    st.one_of(st.none(), st.text(alphabet="Carol 张伟é'\x00", max_size=12)),
)
def test_the_sql_twin_gives_the_functions_words(
    content: str, when: float, name: str | None
) -> None:
    _tokens("")
    conn = _TOKENS[0]
    in_sql = conn.execute(f"SELECT {about_words_sql('?1', '?2', '?3')}", (content, when, name))
    assert _tokens(in_sql.fetchone()[0]) == _tokens(about_words(content, when, name))


def test_no_text_no_words() -> None:
    assert about_words("", MONDAY, "Caroline") == ""
    assert _tokens(about_words("hi", MONDAY, "张伟")) == [
        "mai", "mayo", "5", "月", "mondai", "lune", "星期", "期一", "一", "2023", "8", "张伟", "伟",
    ]  # fmt: skip


def make_v9_database(path: Path) -> None:
    """A state.db as version 9 left it: the word index holds the text alone."""
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, target=9) == 9
    conn.execute(
        "INSERT INTO sessions(id, source, user_key, owner_token, chat_id, chat_type, "
        "started_at, root_id, message_count) VALUES (1, 'telegram', 'telegram-1', ?, '-5', "
        "'group', 1, 1, 0), (2, 'telegram', 'telegram-1', ?, '-6', 'group', 1, 2, 0)",
        (owner_token("telegram-1"), owner_token("telegram-1")),
    )
    conn.executemany(
        "INSERT INTO messages(session_id, role, content, timestamp, speaker_name) "
        "VALUES (?, ?, ?, ?, ?)",
        [(1, "user", "the boiler is broken 锅炉坏了", MONDAY, "Caroline"),
         (1, "assistant", "call the plumber", MONDAY + 60, None),
         (2, "user", "spring is here", FRIDAY, "Melanie")],
    )  # fmt: skip
    conn.close()


def found(db: SessionDB, query: str) -> list[int]:
    return [hit.session_id for hit in db.search(query, ME)]


def test_a_version_9_database_is_reindexed_with_dates_and_speakers(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make_v9_database(path)
    with SessionDB(path) as db:
        assert schema_version(db.conn) == SCHEMA_VERSION >= 10
        db.check()  # the rebuilt index agrees with its view
        assert found(db, "lunes") == found(db, "Caroline") == found(db, "锅炉") == [1]
        assert found(db, "marzo viernes") == found(db, "Melanie") == [2]
        assert found(db, "plumber") == [1]
        db.append_message(
            origin=origin("telegram-1", "-6", chat_type="group"),
            message=message("and flowers", FRIDAY + 60, speaker_name="Ann"),
        )
        assert found(db, "ann") == found(db, "flowers") != []
        db.delete_user("telegram-1")  # the triggers' "delete" sees the same tokens
        db.check()


def test_a_connection_without_our_functions_can_check_and_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make_v9_database(path)
    with SessionDB(path):
        pass  # migrated to v10
    plain = sqlite3.connect(path, isolation_level=None)  # no mnemo_* functions
    plain.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    plain.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")
    plain.close()
    with SessionDB(path) as db:
        db.check()
        assert found(db, "Caroline") == [1]


def test_a_new_time_or_speaker_is_indexed_in_place_of_the_old(tmp_path: Path) -> None:
    with SessionDB(tmp_path / "state.db") as db:
        db.append_message(origin=origin(), message=message("hello", MONDAY, speaker_name="Ann"))
        (session,) = found(db, "lunes")
        db.conn.execute("UPDATE messages SET timestamp = ?, speaker_name = 'Bea'", (FRIDAY,))
        db.check()
        assert found(db, "lunes") == found(db, "Ann") == []
        assert found(db, "viernes") == found(db, "bea") == [session]


def test_a_bulk_import_indexes_dates_and_speakers(tmp_path: Path) -> None:
    lines = [
        json.dumps({"session": f"s{n}", "user": "telegram-1", "platform": "telegram",
                    "chat": "-9", "chat_type": "group", "role": "user", "content": text,
                    "timestamp": when, "name": name})
        for n, (text, when, name) in enumerate(
            [("the boiler", "2023-05-08T10:00:00Z", "Caroline"),
             ("spring", "2024-03-01T10:00:00Z", "Melanie")]
        )
    ]  # fmt: skip
    with SessionDB(tmp_path / "state.db") as db:
        assert db.import_lines(lines).messages_inserted == 2
        db.check()
        (monday,) = found(db, "lunes")
        assert found(db, "Caroline") == [monday]
        assert found(db, "Melanie marzo") != [monday] and len(found(db, "Melanie marzo")) == 1

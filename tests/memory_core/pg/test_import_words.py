"""An import's COPY lines: the words are `index_documents`' tsvectors, the fields read back as sent.

`import_words.index_literals` writes a lexeme once per position (the server
merges them) instead of `index_documents`' grouped literal; the server is the
judge that both are the same tsvector, on the contract corpus of
test_search_tokens and on texts past the limits where the grouped literal is
used instead.
"""

from __future__ import annotations

import psycopg

from memory_core.pg.import_words import copy_lines, index_literals, symbols_value
from memory_core.pg.search_text import IndexRow, index_documents
from tests.memory_core.pg.test_search_tokens import corpus, rows_with_times

EDGES: list[IndexRow] = [
    ("user", "deploy " * 300 + "Ann", 1_700_000_000.0, "Ann"),  # 300 positions of one lexeme
    ("user", "Ann met Ann and ann", 1_700_000_000.0, "Ann"),  # the speaker in the text too
    ("user", "x" * 600 + " short", 1_700_000_000.0, None),  # a token past the short ones
    ("assistant", "", 1_700_000_000.0, "Ann"),  # no text: no about words either
    ("user", "🎉 ☕", 1_700_000_000.0, None),  # no word in the text: only the date's
    ("user", "word " * 17_000, 1_700_000_000.0, None),  # past the last position
    ("tool", '{"q": "ferry \\\\ times", "a": "it\'s 7:40"}', 1_700_000_000.0, None),
]


def server_vectors(
    conn: psycopg.Connection[tuple[object, ...]], literals: list[str | None]
) -> list[str | None]:
    cur = conn.execute(
        "SELECT x::tsvector::text FROM unnest(%s::text[]) WITH ORDINALITY AS t(x, n) ORDER BY n",
        (literals,),
    )
    return [row[0] for row in cur.fetchall()]  # type: ignore[misc]


def test_the_literals_are_index_documents_tsvectors(pg_database: str) -> None:
    rows = rows_with_times(corpus()) + EDGES
    flat = index_literals(rows)
    grouped = index_documents(rows)
    with psycopg.connect(pg_database) as conn:
        assert server_vectors(conn, flat) == server_vectors(conn, grouped)
    differ = sum(a != b for a, b in zip(flat, grouped, strict=True))
    assert differ > len(rows) // 2  # most written once per position: the test reads them
    assert [flat[-7], flat[-5], flat[-2]] == [grouped[-7], grouped[-5], grouped[-2]]  # limits


def test_copy_lines_read_back_as_the_rows(pg_database: str) -> None:
    rows = [
        ("user", "tab\there, line\nbreak, return\r, back\\slash \\N", None, None, None,
         1_700_000_000.123456, "Ann\tB"),
        ("assistant", "", None, '[{"id": "c1"}]', None, 1_699_999_999.5, None),
        ("tool", "out 🎉", "web", None, "c1", 0.1 + 0.2, None),
        ("user", "Noted: the ferry 🚢⛴", None, None, None, 1e15 + 0.25, "Zoë"),
    ]  # fmt: skip
    lines = copy_lines(rows)
    with psycopg.connect(pg_database) as conn:
        conn.execute(
            "CREATE TABLE t (n INT, role TEXT, content TEXT, tool_name TEXT, tool_calls TEXT, "
            "tool_call_id TEXT, timestamp DOUBLE PRECISION, speaker_name TEXT, words TSVECTOR, "
            "symbols TEXT)"
        )
        with conn.cursor().copy("COPY t FROM STDIN") as copy:
            copy.write(b"".join(b"%d\t" % n + line for n, line in enumerate(lines)))
        found = conn.execute("SELECT * FROM t ORDER BY n").fetchall()
        want = server_vectors(conn, index_documents([(r[0], r[1], r[5], r[6]) for r in rows]))
    assert [tuple(r[1:8]) for r in found] == rows
    assert [r[8] for r in found] == want
    assert [r[9] for r in found] == [symbols_value(r[0], r[1]) for r in rows]
    assert found[2][9] is None and found[3][9] == rows[3][1]  # tool output has none

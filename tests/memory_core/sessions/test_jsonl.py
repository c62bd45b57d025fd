"""JSON Lines import/export: format, errors (nothing imported), idempotency, SIGKILL safety."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_core.errors import ImportFormatError
from memory_core.scopes import SearchScope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.importer import CHUNK_ROWS
from memory_core.sessions.jsonl import MAX_LINE_BYTES, parse_timestamp
from tests.memory_core.sessions.helpers import message, origin
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[3]


def line(**fields: object) -> str:
    record = {
        "session": "s1", "user": "telegram-1", "platform": "telegram", "chat": "c1",
        "chat_type": "private", "role": "user", "content": "hello", "timestamp": 1000,
    }  # fmt: skip
    record.update(fields)
    return json.dumps({k: v for k, v in record.items() if v is not ...}, ensure_ascii=False)


SAMPLE = [
    line(content="we booked the ferry to 小岛", timestamp="2024-05-01T10:00:00Z"),
    line(role="assistant", content="Enjoy the ferry!", timestamp="2024-05-01T10:00:05+00:00"),
    line(session="s2", chat="g1", chat_type="group", content="group ferry chat", name="Ann",
         timestamp=1714560000.5),
    line(session="s1", user="telegram-2", content="someone else's ferry", timestamp=1714560001),
]  # fmt: skip


@pytest.fixture
def db(tmp_path: Path):
    with SessionDB(tmp_path / "state.db") as opened:
        yield opened


def counts(db: SessionDB) -> tuple[int, int]:
    return (
        db.conn.execute("SELECT count(*) FROM sessions").fetchone()[0],
        db.conn.execute("SELECT count(*) FROM messages").fetchone()[0],
    )


def test_import_creates_sessions_as_given(db: SessionDB) -> None:
    result = db.import_lines(SAMPLE)
    assert (result.lines, result.sessions_created, result.messages_inserted) == (4, 3, 4)
    row = db.conn.execute(
        "SELECT source, user_key, chat_id, chat_type, started_at, ended_at, external_id "
        "FROM sessions WHERE external_id = 's1' AND user_key = 'telegram-1'"
    ).fetchone()
    assert row == ("telegram", "telegram-1", "c1", "private", 1714557600.0, 1714557605.0, "s1")
    hits = db.search("ferry", SearchScope("telegram-1"))
    assert {h.external_id for h in hits} == {"s1", "s2"}
    assert db.search("小岛", SearchScope("telegram-1"))[0].external_id == "s1"
    db.check()


def test_triggers_are_back_after_an_import(db: SessionDB) -> None:
    db.import_lines(SAMPLE)
    db.append_message(origin=origin(), message=message("live walrus message"))
    assert len(db.search("walrus", SearchScope("telegram-1"))) == 1
    db.check()


def test_export_then_import_round_trips(db: SessionDB, tmp_path: Path) -> None:
    db.import_lines(SAMPLE)
    db.append_messages(
        origin=origin(),
        messages=[message("live one", 2000.5), message('{"ok": 1}', 2001.0, role="tool",
                                                         tool_name="calc", tool_call_id="c9")],
    )  # fmt: skip
    exported = list(db.export_lines("telegram-1"))
    assert len(exported) == 5 and all("telegram-2" not in x for x in exported)
    with SessionDB(tmp_path / "copy.db") as copy:
        copy.import_lines(exported)
        assert list(copy.export_lines("telegram-1")) == exported
        copy.check()


def test_importing_twice_adds_nothing_and_extends_with_new_lines(db: SessionDB) -> None:
    db.import_lines(SAMPLE)
    again = db.import_lines(SAMPLE)
    assert (again.sessions_created, again.messages_inserted, again.messages_skipped) == (0, 0, 4)
    more = db.import_lines([*SAMPLE[:2], line(content="a later message", timestamp=1714600000)])
    assert (more.sessions_extended, more.messages_inserted, more.messages_skipped) == (1, 1, 2)
    ended = db.conn.execute(
        "SELECT ended_at, message_count FROM sessions WHERE external_id = 's1' "
        "AND user_key = 'telegram-1'"
    ).fetchone()
    assert ended == (1714600000.0, 3)
    db.check()


BAD_LINES = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "one JSON object"),
    (line(role=...), "missing role"),
    (line(extra=1), "unknown key 'extra'"),
    (line(role="bot"), "'role' must be"),
    (line(chat_type="channel"), "'chat_type' must be"),
    (line(timestamp="yesterday-ish"), "bad timestamp"),
    (line(timestamp=True), "bad timestamp"),
    (line(timestamp=float("inf")), "bad timestamp"),
    (line(user=""), "'user' must be a non-empty string"),
    (line(content=5), "'content' must be a string"),
    (line(name=5), "'name' must be a string"),
    (line(chat="elsewhere"), "session 's1' is in chat 'c1'"),
    # item 6: input the bot could never have written, refused at the door
    (line(timestamp=-1), "outside the years 1970 to 9999"),
    (line(timestamp="1969-12-31T23:59:59Z"), "outside the years 1970 to 9999"),
    (line(timestamp=253402300800), "outside the years 1970 to 9999"),
    (line(timestamp=99999999999999999999999), "outside the years 1970 to 9999"),
    (line(timestamp=10**400), "bad timestamp"),
    (line(timestamp=7).replace(": 7", ": 1e400"), "not finite"),
    (line(timestamp=7).replace(": 7", ": " + "9" * 5000), "not valid JSON"),
    (line(content="X").replace('"X"', '"\\ud800"'), "lone surrogate"),
    (line(name="X").replace('"X"', '"a\\udfffb"'), "'name' holds a lone surrogate"),
    (line(content="X").replace('"X"', "[" * 100_000 + "]" * 100_000), "nested too deeply"),
    (line(content="X").replace('"X"', '{"a": ' * 100_000 + "1" + "}" * 100_000), "nested"),
    (line(user="../../etc"), "'user': invalid user key"),
    (line(user="telegram-ABC"), "'user': invalid user key"),
    (line(user="telegram-1/.."), "'user': invalid user key"),
    (line(platform="Tele gram"), "'platform' must be lowercase"),
    (line(platform="../x"), "'platform' must be lowercase"),
]


@pytest.mark.parametrize(("bad", "problem"), BAD_LINES)
def test_a_bad_line_names_its_number_and_imports_nothing(
    db: SessionDB, bad: str, problem: str
) -> None:
    db.import_lines([line(session="before", content="kept")])
    before = counts(db)
    lines = [SAMPLE[0], "", SAMPLE[1], bad, SAMPLE[2]]
    with pytest.raises(ImportFormatError) as caught:
        db.import_lines(lines)
    assert caught.value.line == 4 and str(caught.value).startswith("line 4: ")
    assert problem in str(caught.value)
    assert counts(db) == before
    db.check()  # the insert trigger is back too


def test_bad_bytes_name_their_line(db: SessionDB) -> None:
    with pytest.raises(ImportFormatError, match=r"line 2: not UTF-8"):
        db.import_lines([SAMPLE[0].encode(), b'{"session": "\xff"}'])
    assert counts(db) == (0, 0)


def test_a_line_over_the_cap_is_refused_without_reading_it_whole(
    db: SessionDB, tmp_path: Path
) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("wb") as out:
        out.write(SAMPLE[0].encode() + b"\n")
        out.write(b"\0" * (MAX_LINE_BYTES * 3))  # no newline, like /dev/zero
    with big.open("rb") as lines, pytest.raises(ImportFormatError, match=r"^line 2: longer than"):
        db.import_lines(lines)
    assert counts(db) == (0, 0)
    with pytest.raises(ImportFormatError, match=r"^line 1: longer than"):
        db.import_lines([line(content="x" * (MAX_LINE_BYTES + 10))])
    exact = line(content="y" * (MAX_LINE_BYTES - len(line(content=""))))  # right at the cap
    (tmp_path / "exact.jsonl").write_text(exact + "\n")
    with (tmp_path / "exact.jsonl").open("rb") as lines:
        assert db.import_lines(lines).messages_inserted == 1


def test_timestamps_at_the_edges_of_the_range_export_and_search(db: SessionDB) -> None:
    db.import_lines(
        [line(content="epoch start walrus", timestamp=0),
         line(content="last moment walrus", timestamp="9999-12-31T23:59:59.999Z")]
    )  # fmt: skip
    exported = [json.loads(x)["timestamp"] for x in db.export_lines("telegram-1")]
    assert exported[0] == "1970-01-01T00:00:00+00:00"
    assert exported[1].startswith("9999-12-31T23:59:59.99")
    assert len(db.search("walrus", SearchScope("telegram-1"))[0].snippets) == 2


def test_progress_reports_every_line(db: SessionDB) -> None:
    seen: list[int] = []
    db.import_lines([SAMPLE[0], "", SAMPLE[1]], progress=seen.append)
    assert sum(seen) == 3


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0.0), (1.5, 1.5), ("1.5", 1.5), ("1970-01-01T00:00:10", 10.0),
     ("1970-01-01T01:00:10+01:00", 10.0), ("1970-01-01T00:00:10Z", 10.0)],
)  # fmt: skip
def test_timestamps(value: object, expected: float) -> None:
    assert parse_timestamp(value) == expected


def write_big_file(path: Path, sessions: int, per_session: int) -> None:
    rng = random.Random(5)
    words = ["alpha", "beta", "gamma", "delta", "kayak", "river", "plan"]
    with path.open("w", encoding="utf-8") as out:
        for s in range(sessions):
            for i in range(per_session):
                text = " ".join(rng.choice(words) for _ in range(12))
                if i % 10 == 0:  # some CJK (the integrity check reads it through the view's SQL)
                    text += " 天气 服务器"
                out.write(line(session=f"s{s}", user=f"telegram-{s % 50}", content=text,
                               role="user" if i % 2 == 0 else "assistant",
                               timestamp=1_700_000_000 + s * 1000 + i) + "\n")  # fmt: skip


def run_import(home: Path, file: Path) -> subprocess.Popen[bytes]:
    code = "import sys; from gateway.cli import main; sys.exit(main())"
    return subprocess.Popen(
        [sys.executable, "-c", code, "sessions", "import", str(file)],
        cwd=ROOT,
        env={"MNEMO_HOME": str(home), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def staged_rows(path: Path) -> int:
    """Messages an import has staged so far (0 while the database is not there yet)."""
    if not path.exists():
        return 0
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return int(
            conn.execute(
                "SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id "
                "WHERE s.user_key GLOB '~import *'"
            ).fetchone()[0]
        )
    except sqlite3.OperationalError:  # the schema is still being created
        return 0
    finally:
        conn.close()


@pytest.mark.slow
def test_sigkill_during_an_import_leaves_a_consistent_database(tmp_path: Path) -> None:
    """Each import is killed once it has staged a random share of the file."""
    sessions, per_session = 400, 50
    big = tmp_path / "big.jsonl"
    write_big_file(big, sessions, per_session)
    home = tmp_path / "home"
    rng = random.Random(11)
    for _ in range(4):
        # At least one chunk is still to come when the threshold is reached.
        threshold = rng.randint(1, sessions * per_session - CHUNK_ROWS)
        proc = run_import(home, big)
        deadline = time.monotonic() + scaled(60)
        while proc.poll() is None and staged_rows(home / "state.db") < threshold:
            assert time.monotonic() < deadline, "the import staged nothing within 60 s"
            time.sleep(0.005)  # polling a condition: how far the import has got
        assert proc.poll() is None, "the import finished before it could be interrupted"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=scaled(60))
        assert_consistent(home / "state.db", sessions, per_session)
    proc = run_import(home, big)
    _, err = proc.communicate(timeout=scaled(120))
    assert proc.returncode == 0, err.decode()
    assert_consistent(home / "state.db", sessions, per_session, complete=True)


def assert_consistent(path: Path, sessions: int, per_session: int, complete: bool = False) -> None:
    """Integrity, both indexes in sync, triggers in place, and no partial import visible.

    A killed import may leave staged rows behind; they belong to sessions with a
    staging user key, which no scope matches, so only the others are visible.
    A complete import has deleted every staged row.
    """
    if not path.exists():
        return
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        if conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'messages'").fetchone()[0]:
            for index in ("messages_fts", "messages_trigram"):
                conn.execute(f"INSERT INTO {index}({index}, rank) VALUES ('integrity-check', 1)")
            sizes = [
                r[0]
                for r in conn.execute(
                    "SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id "
                    "WHERE s.user_key GLOB 'telegram-*' GROUP BY m.session_id"
                )
            ]
            assert all(size == per_session for size in sizes), "a partial session"
            assert len(sizes) in ((sessions,) if complete else (0, sessions))
            triggers = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")
            }
            assert {"messages_ai", "sessions_owner_fixed"} <= triggers
            if complete:
                total = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
                assert total == sessions * per_session, "staged rows were not cleaned up"
    finally:
        conn.close()

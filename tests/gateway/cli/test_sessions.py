"""`mnemo sessions import|export|search|delete|check` through the real click commands."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import main


def record(**fields: object) -> str:
    base = {
        "session": "trip-1", "user": "telegram-1", "platform": "telegram", "chat": "c1",
        "chat_type": "private", "role": "user", "content": "we booked the ferry",
        "timestamp": "2024-05-01T10:00:00+00:00",
    }  # fmt: skip
    base.update(fields)
    return json.dumps(base, ensure_ascii=False)


LINES = [
    record(),
    record(role="assistant", content="The ferry leaves at nine", timestamp=1714557660),
    record(session="trip-2", content="ferry tickets for 小岛", timestamp="2024-06-01T09:00:00Z"),
    record(session="x", user="telegram-2", content="my private ferry secret"),
]


@pytest.fixture
def home() -> Path:
    return Path(os.environ["MNEMO_HOME"])


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def mnemo(*args: str) -> object:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_import_then_search_as_json(data: Path, home: Path) -> None:
    result = mnemo("sessions", "import", str(data))
    assert result.exit_code == 0, result.output
    assert "imported 4 messages (3 new sessions" in result.output
    assert (home / "state.db").exists()
    found = mnemo("sessions", "search", "ferry", "--user", "telegram-1", "--json")
    assert found.exit_code == 0
    hits = json.loads(found.output)
    assert [h["session"] for h in hits] == ["trip-1", "trip-2"]
    first = hits[0]
    assert set(first) >= {"session", "session_id", "started_at", "source", "score", "snippet"}
    assert first["source"] == "telegram" and first["started_at"] == 1714557600.0
    assert ">>>ferry<<<" in first["snippet"]
    assert all("secret" not in h["snippet"] for h in hits)


def test_search_options(data: Path) -> None:
    mnemo("sessions", "import", str(data))
    text = mnemo("sessions", "search", "ferry", "--user", "telegram-1")
    assert text.exit_code == 0 and "1. session trip-1" in text.output
    assert "[assistant 2024-05-01T10:01:00+00:00]" in text.output
    since = mnemo("sessions", "search", "ferry", "--user", "telegram-1", "--since", "2024-05-15",
                  "--json")  # fmt: skip
    assert [h["session"] for h in json.loads(since.output)] == ["trip-2"]
    until = mnemo("sessions", "search", "ferry", "--user", "telegram-1", "--until", "1714600000",
                  "--limit", "5", "--json")  # fmt: skip
    assert [h["session"] for h in json.loads(until.output)] == ["trip-1"]
    chat = mnemo("sessions", "search", "ferry", "--user", "telegram-1", "--chat", "none", "--json")
    assert json.loads(chat.output) == []
    cjk = mnemo("sessions", "search", "小岛", "--user", "telegram-1", "--json")
    assert [h["session"] for h in json.loads(cjk.output)] == ["trip-2"]
    nothing = mnemo("sessions", "search", "zeppelin", "--user", "telegram-1")
    assert "no matching sessions" in nothing.output
    bad = mnemo("sessions", "search", "ferry", "--user", "telegram-1", "--since", "whenever")
    assert bad.exit_code == 2 and "--since" in bad.output


def test_a_bad_line_fails_with_its_number_and_imports_nothing(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([LINES[0], LINES[1], '{"session": "oops"}']) + "\n")
    result = CliRunner().invoke(main, ["sessions", "import", str(path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith("mnemo: line 3: missing ")
    conn = sqlite3.connect(home / "state.db")
    assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    conn.close()


def test_export_writes_the_import_format(data: Path, tmp_path: Path) -> None:
    mnemo("sessions", "import", str(data))
    out = tmp_path / "export.jsonl"
    result = mnemo("sessions", "export", "--user", "telegram-1", "--output", str(out))
    assert result.exit_code == 0 and "exported 3 messages" in result.output
    exported = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [e["content"] for e in exported] == [
        "we booked the ferry", "The ferry leaves at nine", "ferry tickets for 小岛",
    ]  # fmt: skip
    assert exported[0] == json.loads(LINES[0])
    to_stdout = mnemo("sessions", "export", "--user", "telegram-2")
    assert "my private ferry secret" in to_stdout.output


def test_delete_erases_one_person(data: Path) -> None:
    mnemo("sessions", "import", str(data))
    refused = CliRunner().invoke(main, ["sessions", "delete", "--user", "telegram-1"], input="n\n")
    assert refused.exit_code == 1
    result = mnemo("sessions", "delete", "--user", "telegram-1", "--yes")
    assert result.exit_code == 0 and "deleted 2 sessions and 3 messages" in result.output
    gone = mnemo("sessions", "search", "ferry", "--user", "telegram-1", "--json")
    assert json.loads(gone.output) == []
    kept = mnemo("sessions", "search", "ferry", "--user", "telegram-2", "--json")
    assert len(json.loads(kept.output)) == 1
    assert mnemo("sessions", "check").exit_code == 0


def test_check_reports_each_part_and_fails_on_damage(data: Path, home: Path) -> None:
    mnemo("sessions", "import", str(data))
    ok = mnemo("sessions", "check")
    assert ok.exit_code == 0
    assert "ok   index messages_fts" in ok.output and "ok   index messages_trigram" in ok.output
    conn = sqlite3.connect(home / "state.db")
    conn.execute("DROP TRIGGER messages_ai")
    conn.execute(
        "INSERT INTO messages(session_id, role, content, timestamp) VALUES (1, 'user', 'x', 1)"
    )
    conn.commit()
    conn.close()
    broken = CliRunner().invoke(main, ["sessions", "check"])
    assert broken.exit_code == 1 and "out of sync" in broken.output


def test_commands_without_a_database_say_so(home: Path) -> None:
    result = CliRunner().invoke(main, ["sessions", "search", "x", "--user", "telegram-1"])
    assert result.exit_code == 1 and "no session history" in result.output
    assert not (home / "state.db").exists()

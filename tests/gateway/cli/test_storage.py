"""`mnemo storage migrate|check`: a filled SQLite data directory moved into PostgreSQL,
checked on both sides, the source untouched; and each refusal in one line."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from gateway.cli import main
from gateway.service import instance_lock
from gateway.urls import redact_url_password
from memory_core import SkillsStore

ADA, BOB = "telegram-1", "telegram-2"


def record(user: str, session: str, content: str, ts: float) -> str:
    return json.dumps(
        {
            "session": session, "user": user, "platform": "telegram", "chat": user,
            "chat_type": "private", "role": "user", "content": content, "timestamp": ts,
        }
    )  # fmt: skip


def mnemo(env: dict[str, str], *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env, input=input, catch_exceptions=False)


def tree(home: Path) -> dict[str, str]:
    """Every file's bytes by path; the instance lock aside (the move holds it: an empty
    file that any bot run leaves behind too)."""
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file() and p.name != "mnemo.lock"
    }


@pytest.fixture
def sqlite_env(tmp_path: Path) -> dict[str, str]:
    """A data directory as a bot leaves it: history, profiles with an undone change,
    shared notes, a person's own skill and the manifest."""
    home, skills = tmp_path / "home", tmp_path / "skills"
    skills.mkdir()
    env = {"MNEMO_HOME": str(home), "MNEMO_SKILLS_DIR": str(skills), "MNEMO_DATABASE_URL": ""}
    data = tmp_path / "h.jsonl"
    lines = [record(ADA, "a1", "the ferry to Hydra 🚢", 1_700_000_000.125),
             record(ADA, "a1", "服务器部署 noted", 1_700_000_001),
             record(BOB, "b1", "quince jam", 1_700_000_002)]  # fmt: skip
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert mnemo(env, "sessions", "import", str(data)).exit_code == 0
    for args in (("--user", ADA, "Ada rows"), ("--user", BOB, "Bob bakes"), ("--shared", "Tea")):
        assert mnemo(env, "memory", "add", *args).exit_code == 0
    assert mnemo(env, "memory", "undo", "--user", BOB).exit_code == 0
    store = SkillsStore(skills, home / "skills-manifest.json")
    store.create("rowing", "---\nname: rowing\ndescription: Oars.\n---\n# Row\n", user_key=ADA)
    return env


def digest_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if re.match(r"ok   (memory|skills): sha256", line)]


def test_a_move_copies_everything_verifies_it_and_leaves_the_source(
    sqlite_env: dict[str, str], pg_database: str
) -> None:
    home = Path(sqlite_env["MNEMO_HOME"])
    assert mnemo(sqlite_env, "users", "allow", "telegram:4242").exit_code == 0  # access.json
    before = tree(home)
    on_sqlite = mnemo(sqlite_env, "storage", "check")
    assert on_sqlite.exit_code == 0, on_sqlite.output
    assert on_sqlite.stdout.endswith("the SQLite data directory is consistent\n")
    moved = mnemo(sqlite_env, "storage", "migrate", "--to", pg_database, "--yes")
    assert moved.exit_code == 0, moved.output
    lines = moved.stdout.splitlines()
    assert lines[0].startswith("ok   sessions: 2 sessions, 3 messages, 0 inbox")
    assert lines[1].startswith("ok   memory: ") and lines[2].startswith("ok   skills: ")
    assert lines[3].startswith("ok   documents: ")  # the access list
    pasted = redact_url_password(pg_database)  # a user name alone is kept: it can be pasted
    where = "" if pasted == pg_database else " with your password in place of ***"
    assert lines[4:] == [
        "verified: digests match",
        f"next: set MNEMO_DATABASE_URL={pasted}{where} (or storage.url) and start mnemo run",
    ]
    assert tree(home) == before  # not a byte of the data directory changed
    pg_env = {**sqlite_env, "MNEMO_DATABASE_URL": pg_database}
    on_pg = mnemo(pg_env, "storage", "check")
    assert on_pg.exit_code == 0, on_pg.output
    assert "ok   message words" in on_pg.stdout and "ok   schema skills v1" in on_pg.stdout
    assert on_pg.stdout.endswith("the PostgreSQL database is consistent\n")
    assert len(digest_lines(on_pg.stdout)) == 2
    assert digest_lines(on_pg.stdout) == digest_lines(on_sqlite.stdout)
    # the same answers from both (the skills as text: the JSON names a folder or a row)
    for args in (("sessions", "search", "ferry", "--user", ADA, "--json"),
                 ("memory", "history", "--user", BOB, "--json"),
                 ("skills", "list"),
                 ("users", "allowed", "--json")):  # fmt: skip
        assert mnemo(pg_env, *args).stdout == mnemo(sqlite_env, *args).stdout


def test_a_target_holding_anything_is_refused_in_one_line(
    sqlite_env: dict[str, str], pg_database: str
) -> None:
    assert mnemo(sqlite_env, "storage", "migrate", "--to", pg_database, "--yes").exit_code == 0
    again = mnemo(sqlite_env, "storage", "migrate", "--to", pg_database, "--yes")
    assert again.exit_code == 1 and again.stdout == ""
    assert again.stderr.startswith("mnemo: the target database already holds ")
    assert again.stderr.count("\n") == 1


def test_a_running_bot_a_postgres_source_and_a_wrong_url_are_refused(
    sqlite_env: dict[str, str], pg_database: str
) -> None:
    home = Path(sqlite_env["MNEMO_HOME"])
    with instance_lock(home):
        running = mnemo(sqlite_env, "storage", "migrate", "--to", pg_database, "--yes")
    assert running.exit_code == 1
    assert running.stderr == (
        f"mnemo: a running mnemo serves {home.resolve()}: stop it before moving its data\n"
    )
    on_pg = {**sqlite_env, "MNEMO_DATABASE_URL": pg_database}
    already = mnemo(on_pg, "storage", "migrate", "--to", pg_database, "--yes")
    assert already.exit_code == 1 and "already keeps its data in PostgreSQL" in already.stderr
    wrong = mnemo(sqlite_env, "storage", "migrate", "--to", "mysql://root:hunter2@db/x")
    assert wrong.exit_code == 2 and "mysql://***@db/x" in wrong.stderr
    asked = mnemo(
        sqlite_env,
        "storage",
        "migrate",
        "--to",
        "postgresql://me:hunter2@127.0.0.1:1/x",
        input="n\n",
    )
    assert asked.exit_code == 1 and "into postgresql://***@127.0.0.1:1/x?" in asked.output
    assert all("hunter2" not in r.output for r in (wrong, asked))
    with psycopg.connect(pg_database) as conn:  # nothing reached the database
        assert conn.execute("SELECT to_regclass('sessions')").fetchone() == (None,)


def test_check_finds_damage_on_either_backend(sqlite_env: dict[str, str], pg_database: str) -> None:
    assert mnemo(sqlite_env, "storage", "migrate", "--to", pg_database, "--yes").exit_code == 0
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("UPDATE messages SET words = ''::tsvector WHERE id = 1")
    broken = mnemo({**sqlite_env, "MNEMO_DATABASE_URL": pg_database}, "storage", "check")
    assert broken.exit_code == 1 and "FAIL 1 rows with wrong message words" in broken.stdout
    assert broken.stderr == "mnemo: 1 problem in the PostgreSQL database\n"
    conn = sqlite3.connect(Path(sqlite_env["MNEMO_HOME"]) / "state.db")
    with conn:
        conn.execute("UPDATE sessions SET message_count = 7 WHERE id = 1")
    conn.close()
    damaged = mnemo(sqlite_env, "storage", "check")
    assert damaged.exit_code == 1 and "FAIL " in damaged.stdout
    assert damaged.stderr == "mnemo: 1 problem in the SQLite data directory\n"

"""`mnemo storage migrate` is all or nothing: text PostgreSQL cannot hold is mapped as
the store maps it, the source directory gains no file, and a move killed at any of its
parts leaves an empty database that a second move fills exactly as a clean one does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from gateway.cli import main
from memory_core import SkillsStore
from memory_core.file_memory import FileMemoryStore
from memory_core.file_memory.edits import Operation
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.stores import ALL_MIGRATIONS
from memory_core.sessions import NewMessage, SessionDB, SessionOrigin
from tests.gateway.processes import MNEMO
from tests.postgres import schema_url
from tests.timing import scaled

ADA = "telegram-1"


def mnemo(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def listing(home: Path) -> list[str]:
    """Every path under `home` (files and folders), the instance lock aside: the move
    holds it, and any bot run leaves it behind too."""
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.name != "mnemo.lock")


def environment(tmp: Path) -> dict[str, str]:
    home, skills = tmp / "home", tmp / "skills"
    skills.mkdir(parents=True)
    return {"MNEMO_HOME": str(home), "MNEMO_SKILLS_DIR": str(skills), "MNEMO_DATABASE_URL": ""}


def import_history(env: dict[str, str], path: Path, people: int, per_person: int) -> None:
    lines = (
        json.dumps({"session": f"s{p}", "user": f"telegram-{p}", "platform": "telegram",
                    "chat": str(p), "chat_type": "private", "role": "user",
                    "content": f"note {n} about the ferry {p} to Hydra",
                    "timestamp": 1_700_000_000 + p * per_person + n})
        for p in range(1, people + 1) for n in range(per_person)
    )  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = mnemo(env, "sessions", "import", str(path))
    assert result.exit_code == 0, result.output


@pytest.fixture
def plain_env(tmp_path: Path) -> dict[str, str]:
    """A small data directory: history, a profile, shared notes, the access list."""
    env = environment(tmp_path)
    import_history(env, tmp_path / "h.jsonl", 2, 2)
    for args in (("--user", ADA, "Ada rows"), ("--shared", "Tea at four")):
        assert mnemo(env, "memory", "add", *args).exit_code == 0
    assert mnemo(env, "users", "allow", "telegram:4242").exit_code == 0
    return env


@pytest.fixture
def nul_env(plain_env: dict[str, str]) -> dict[str, str]:
    """The small data directory with a NUL in a message, a shared memory entry and a
    profile (SQLite and the memory files keep it as it is)."""
    home = Path(plain_env["MNEMO_HOME"])
    origin = SessionOrigin("telegram:1", "telegram", ADA, "1", "private")
    with SessionDB(home / "state.db") as db:
        nul = NewMessage("user", "tea\x00time", 1_800_000_000, key="t1:0")
        db.append_messages(origin=origin, messages=[nul])
    memory = FileMemoryStore(home)
    memory.apply("memory", None, [Operation("add", "shared\x00note")])
    memory.apply("user", ADA, [Operation("add", "Ada rows\x00daily")])
    return plain_env


def test_nul_in_a_message_a_memory_entry_and_a_profile_is_stored_as_u_fffd(
    nul_env: dict[str, str], pg_database: str
) -> None:
    before = listing(Path(nul_env["MNEMO_HOME"]))
    moved = mnemo(nul_env, "storage", "migrate", "--to", pg_database, "--yes")
    assert moved.exit_code == 0, moved.output
    lines = moved.stdout.splitlines()
    assert "; 1 text with NUL stored as U+FFFD" in lines[0]  # sessions: the message
    # memory: the shared entry and the profile's, each with the change that added it
    assert "; 4 texts with NUL stored as U+FFFD" in lines[1]
    assert "note: 5 texts held NUL, which PostgreSQL cannot store" in moved.stdout
    assert "verified: digests match" in moved.stdout
    with psycopg.connect(pg_database) as conn:
        content = conn.execute("SELECT content FROM messages WHERE content LIKE 'tea%'").fetchall()
        entries = conn.execute("SELECT text FROM memory_entries ORDER BY text").fetchall()
    assert content == [("tea\ufffdtime",)]
    assert ("Ada rows\ufffddaily",) in entries and ("shared\ufffdnote",) in entries
    checked = mnemo({**nul_env, "MNEMO_DATABASE_URL": pg_database}, "storage", "check")
    assert checked.exit_code == 0, checked.output
    assert listing(Path(nul_env["MNEMO_HOME"])) == before


def test_a_move_adds_no_file_to_the_source(plain_env: dict[str, str], pg_database: str) -> None:
    """state.db is opened read-only: no -wal or -shm appear beside it, nor any lock file
    or folder of the memory (only read). Run as a person would, in a process of its own."""
    home = Path(plain_env["MNEMO_HOME"])
    before = listing(home)
    assert "state.db" in before and "state.db-wal" not in before
    command = [str(MNEMO), "storage", "migrate", "--to", pg_database, "--yes"]
    moved = subprocess.run(command, env={**os.environ, **plain_env}, capture_output=True,
                           text=True, timeout=scaled(300))  # fmt: skip
    assert moved.returncode == 0, moved.stderr
    assert listing(home) == before


# --- a move killed at each of its parts ----------------------------------------------

# The table each part writes first; its lock, held until the commit, shows the part began.
PARTS = {
    "sessions": "messages",
    "memory": "memory_versions",
    "skills": "skill_people",
    "documents": "documents",
}


@pytest.fixture(scope="module")
def big_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A data directory large enough that each part of a move takes a moment."""
    tmp = tmp_path_factory.mktemp("big")
    env = environment(tmp)
    home = Path(env["MNEMO_HOME"])
    import_history(env, tmp / "h.jsonl", 200, 40)  # 8,000 messages
    memory = FileMemoryStore(home)
    for p in range(1, 301):
        memory.apply("user", f"telegram-{p}", [Operation("add", f"person {p} likes ferries")])
    memory.apply("memory", None, [Operation("add", "the team meets on Mondays")])
    skills = SkillsStore(Path(env["MNEMO_SKILLS_DIR"]), home / "skills-manifest.json")
    for n in range(20):
        text = f"---\nname: oars{n}\ndescription: Oars {n}.\n---\n# Row {n}\n"
        skills.create(f"oars{n}", text, user_key=f"telegram-{n + 1}")
    assert mnemo(env, "users", "allow", "telegram:4242").exit_code == 0
    return env


@pytest.fixture(scope="module")
def schemas(pg_shared: str) -> Iterator[list[str]]:
    """Empty schemas made on demand (a list to append the URLs to), all dropped after."""
    made: list[str] = []
    yield made
    with psycopg.connect(pg_shared, autocommit=True) as conn:
        for name in made:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def new_schema(pg_shared: str, made: list[str]) -> str:
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_shared, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    made.append(name)
    return schema_url(pg_shared, name)


@pytest.fixture(scope="module")
def schema_only(pg_shared: str, schemas: list[str]) -> dict[str, int]:
    """The rows of a database holding Mnemo's schema and nothing moved into it."""
    url = new_schema(pg_shared, schemas)
    with PgSyncDatabase(url, max_size=1) as db:
        db.migrate(ALL_MIGRATIONS)
    return held_rows(url)


@pytest.fixture(scope="module")
def clean_move(big_env: dict[str, str], pg_shared: str, schemas: list[str]) -> list[str]:
    """The summary lines of a move run to its end (the 'next:' line, naming the URL, aside)."""
    moved = mnemo(big_env, "storage", "migrate", "--to", new_schema(pg_shared, schemas), "--yes")
    assert moved.exit_code == 0, moved.output
    return moved.stdout.splitlines()[:-1]


def held_rows(url: str) -> dict[str, int]:
    """Every table of the schema (its record of migrations aside) with the rows it holds."""
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_name <> 'mnemo_schema'"
        ).fetchall()
        return {
            str(t): int(conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0])  # type: ignore[index]
            for (t,) in tables
        }


def migrated(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Whether every migration step is recorded in `conn`'s schema (the move's copy may
    begin; a write lock before that is a migration's)."""
    if conn.execute("SELECT to_regclass('mnemo_schema')").fetchone() in (None, (None,)):
        return False
    row = conn.execute("SELECT count(*) FROM mnemo_schema").fetchone()
    return row is not None and row[0] == len(ALL_MIGRATIONS)


def kill_when_writing(command: list[str], env: dict[str, str], url: str, table: str) -> int:
    """Start `command`, SIGKILL it as soon as its transaction holds a write lock on `table`
    (so that part of the move has begun and nothing is committed yet); its return code."""
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            deadline = time.monotonic() + scaled(180)
            while time.monotonic() < deadline and process.poll() is None:
                found = (
                    migrated(conn)
                    and conn.execute(  # the copy's, not a migration's
                        "SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                        "WHERE l.pid <> pg_backend_pid() AND l.mode = 'RowExclusiveLock' "
                        "AND c.relname = %s AND c.relnamespace = current_schema()::regnamespace",
                        (table,),
                    ).fetchone()
                )
                if found:
                    os.kill(process.pid, signal.SIGKILL)
                    break
                time.sleep(0.005)
        out, err = process.communicate(timeout=scaled(60))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL, f"finished before its {table} part: {out}{err}"
    return process.returncode


@pytest.mark.slow
@pytest.mark.parametrize("part", list(PARTS))
def test_a_move_killed_at_each_part_leaves_nothing_and_runs_again(
    part: str,
    big_env: dict[str, str],
    clean_move: list[str],
    schema_only: dict[str, int],
    pg_shared: str,
    schemas: list[str],
) -> None:
    url = new_schema(pg_shared, schemas)
    env = {**os.environ, **big_env}
    kill_when_writing([str(MNEMO), "storage", "migrate", "--to", url, "--yes"], env, url,
                      PARTS[part])  # fmt: skip
    assert "messages" in schema_only and "documents" in schema_only
    assert held_rows(url) == schema_only  # the schema, and nothing of the move
    on_pg = {**big_env, "MNEMO_DATABASE_URL": url}
    checked = mnemo(on_pg, "storage", "check")
    assert checked.exit_code == 0 and "consistent" in checked.stdout, checked.output
    again = mnemo(big_env, "storage", "migrate", "--to", url, "--yes")
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines()[:-1] == clean_move
    assert mnemo(on_pg, "storage", "check").exit_code == 0

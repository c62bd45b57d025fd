"""A message whose store is unavailable before it is stored is not confirmed: no
`on_stored`, no apology, `NotStoredError`; sent again once the store answers, it is
stored and answered once."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import psycopg
import pytest

from gateway.app import Services
from gateway.conversation import Conversations
from gateway.errors import NotStoredError
from memory_core import SearchScope
from memory_core.pg import PgDatabase
from memory_core.pg.sessions import PgSessionStore
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import serving
from tests.gateway.test_conversation import ListSink, message


@contextlib.asynccontextmanager
async def on_postgres(
    services: Services, url: str
) -> AsyncIterator[tuple[Conversations, PgSessionStore]]:
    """The bot of `services` with its sessions on the PostgreSQL at `url`, a write tried
    again for 0.3 s at most; the bot and its session store."""
    async with PgDatabase(url, max_size=2, write_budget=0.3) as db:
        store = PgSessionStore(db)
        await store.open()
        yield serving(dataclasses.replace(services, sessions=store)), store


def _writes(url: str, allowed: bool) -> None:
    """Make the database refuse writes (as a full disk does) or take them again; the
    connections open now are ended, so the pool's next ones follow the setting."""
    name = urlsplit(url).path.lstrip("/")
    setting = (
        "RESET default_transaction_read_only"
        if allowed
        else ("SET default_transaction_read_only = on")
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = off")  # this one may change it
        conn.execute(f'ALTER DATABASE "{name}" {setting}')
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


async def test_a_message_the_store_refuses_is_not_confirmed_then_answered_once_sent_again(
    fake: FakeOpenAI, services: Services, fresh_database: str
) -> None:
    async with on_postgres(services, fresh_database) as (bot, store):
        _writes(fresh_database, allowed=False)
        confirmed: list[str] = []
        sink = ListSink()
        with pytest.raises(NotStoredError):
            await bot.handle(message("remember my kayak trip"), sink, lambda: confirmed.append("x"))
        assert confirmed == []  # the platform sends it again
        assert sink.replies == []  # and the person gets no apology for it
        assert fake.requests == []

        _writes(fresh_database, allowed=True)
        again = ListSink()
        await bot.handle(message("remember my kayak trip"), again, lambda: confirmed.append("x"))
        assert confirmed == ["x"]
        assert len(again.replies) == 1 and "went wrong" not in again.replies[0]
        scope = SearchScope("telegram-42")
        sessions = await store.list_sessions(scope)
        stored = await store.get_messages(sessions[0].id, scope)
        assert [m.content for m in stored if m.role == "user"] == ["remember my kayak trip"]

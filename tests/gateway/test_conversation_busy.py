"""A busy state.db during a turn: a short "busy" line, and the message is still stored later."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.app import Services, open_services
from gateway.config import load_config
from memory_core import SearchScope, SessionStore
from memory_core.sessions import WritePolicy
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import serving
from tests.gateway.test_conversation import SKILLS, ListSink, message


@pytest.fixture
async def services(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    env = {
        "OPENAI_BASE_URL": fake.url + "/v1",
        "MNEMO_HOME": str(tmp_path / "data"),
        "MNEMO_SKILLS_DIR": str(SKILLS),
    }
    async with open_services(load_config(None, environ=env)) as opened:
        policy = WritePolicy(busy_timeout=0.05, wait_timeout=0.3)
        async with SessionStore(opened.sessions.path, writes=policy) as store:
            yield dataclasses.replace(opened, sessions=store)


async def test_a_turn_on_a_locked_store_says_busy_and_keeps_the_message(
    fake: FakeOpenAI, services: Services
) -> None:
    lock = sqlite3.connect(services.sessions.path, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # an operator import holding the write lock
    sink = ListSink()
    await serving(services).handle(message("remember my kayak trip"), sink)
    assert sink.replies == ["(I'm busy right now; please try again in a moment)"]
    assert fake.requests == []  # the model was not asked
    lock.execute("COMMIT")
    lock.close()
    assert await services.sessions.flush(10)
    scope = SearchScope("telegram-42")
    hits = await services.sessions.search("kayak", scope)
    assert len(hits) == 1
    stored = await services.sessions.get_messages(hits[0].session_id, scope)
    assert [(m.role, m.content) for m in stored] == [("user", "remember my kayak trip")]

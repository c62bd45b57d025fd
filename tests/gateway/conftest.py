"""Fixtures shared by the gateway tests: the fake model server, and the bot's
services opened on a fresh data directory against it (the bundled skills)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.app import Services, open_services
from gateway.config import load_config
from tests.fakes.openai import FakeOpenAI

SKILLS = Path(__file__).resolve().parents[2] / "skills"


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(chunk_size=4) as server:
        yield server


@pytest.fixture
async def services(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    env = {
        "OPENAI_BASE_URL": fake.url + "/v1",
        "MNEMO_HOME": str(tmp_path / "data"),
        "MNEMO_SKILLS_DIR": str(SKILLS),
    }
    async with open_services(load_config(None, environ=env)) as opened:
        yield opened

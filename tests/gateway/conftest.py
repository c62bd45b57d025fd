"""Fixtures shared by the gateway tests: the fake model server, and the bot's
services opened on a fresh data directory against it (the bundled skills)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.app import Services, open_services
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import config_for


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(chunk_size=4) as server:
        yield server


@pytest.fixture
async def services(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    async with open_services(config_for(fake.url, tmp_path / "data")) as opened:
        yield opened

"""A model endpoint that answers 404 (most often a base URL without /v1): the error,
and so the turn's log line, names the URL the request was posted to."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gateway.agent.model_client import ModelClient
from gateway.errors import ModelError
from tests.fakes.base import serving_in_thread
from tests.fakes.openai import FakeOpenAI
from tests.timing import scaled

MNEMO = Path(sys.executable).parent / "mnemo"
SKILLS = Path(__file__).resolve().parents[2] / "skills"


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(echo_when_idle=True) as server:
        yield server


@pytest.fixture
def threaded_fake() -> Iterator[FakeOpenAI]:
    with serving_in_thread(FakeOpenAI(echo_when_idle=True)) as server:
        yield server


async def test_a_404_names_the_url_it_was_posted_to(fake: FakeOpenAI) -> None:
    client = ModelClient(fake.url, "sk-test", "gpt-4o-mini", 5.0, max_retries=0)
    try:
        with pytest.raises(ModelError) as info:
            await client.stream_chat([{"role": "user", "content": "hello"}])
    finally:
        await client.close()
    assert info.value.status == 404
    assert f"HTTP 404 from POST {fake.url}/chat/completions" in str(info.value)


async def test_the_url_of_a_404_has_its_credentials_masked(fake: FakeOpenAI) -> None:
    host = fake.url.removeprefix("http://")
    client = ModelClient(f"http://user:sk-abc123@{host}", None, "gpt-4o-mini", 5.0, max_retries=0)
    try:
        with pytest.raises(ModelError) as info:
            await client.complete([{"role": "user", "content": "hello"}])
    finally:
        await client.close()
    assert f"HTTP 404 from POST http://***@{host}/chat/completions" in str(info.value)
    assert "sk-abc123" not in str(info.value)


@pytest.mark.slow  # a real mnemo chat process, start to exit
def test_a_turn_against_a_base_url_without_v1_logs_the_url(
    threaded_fake: FakeOpenAI, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": threaded_fake.url,  # no /v1
        "MNEMO_HOME": str(tmp_path / "data"),
        "MNEMO_SKILLS_DIR": str(SKILLS),
    }
    for name in ("TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "MNEMO_CONFIG", "OPENAI_API_KEY"):
        env.pop(name, None)
    proc = subprocess.run(
        [str(MNEMO), "chat"], input="hello\n", capture_output=True, text=True,
        env=env, cwd=tmp_path, timeout=scaled(60),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (logged,) = [line for line in proc.stderr.splitlines() if "model error" in line]
    assert f"HTTP 404 from POST {threaded_fake.url}/chat/completions" in logged
    assert threaded_fake.url not in proc.stdout  # the person sees a short notice, not the URL

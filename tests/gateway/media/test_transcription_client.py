"""open_services builds the transcription client only when media.transcription.model is set,
on its own base URL or llm's, and the reader's transcriber talks to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.app import open_services
from gateway.config import load_config
from tests.fakes.openai import FakeOpenAI


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key="sk-op") as server:
        yield server


def env(fake: FakeOpenAI, home: Path) -> dict[str, str]:
    return {"OPENAI_BASE_URL": fake.url + "/v1", "OPENAI_API_KEY": "sk-op", "MNEMO_HOME": str(home)}


async def test_no_transcription_model_no_transcriber(fake: FakeOpenAI, tmp_path: Path) -> None:
    config_file = tmp_path / "mnemo.yaml"
    config_file.write_text("llm:\n  model: gpt-4o-mini\n", encoding="utf-8")
    async with open_services(load_config(config_file, environ=env(fake, tmp_path))) as services:
        assert services.transcriber is None


async def test_the_transcriber_follows_llm_base_url_with_its_key(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config_file = tmp_path / "mnemo.yaml"
    config_file.write_text("media:\n  transcription:\n    model: whisper-1\n", encoding="utf-8")
    fake.transcribe("it works")
    async with open_services(load_config(config_file, environ=env(fake, tmp_path))) as services:
        assert services.transcriber is not None and services.transcriber.model == "whisper-1"
        text = await services.transcriber.transcribe(b"OggS", filename="v.ogg", mime="audio/ogg")
    assert text == "it works"
    assert fake.transcriptions[0].authorization == "Bearer sk-op"


async def test_the_transcriber_has_its_own_base_url(tmp_path: Path) -> None:
    async with FakeOpenAI() as main, FakeOpenAI() as speech:
        config_file = tmp_path / "mnemo.yaml"
        config_file.write_text(
            "media:\n  transcription:\n"
            f"    model: whisper-large\n    base_url: {speech.url}/v1\n    timeout: 7\n",
            encoding="utf-8",
        )
        speech.transcribe("from the speech server")
        environ = {"OPENAI_BASE_URL": main.url + "/v1", "MNEMO_HOME": str(tmp_path)}
        async with open_services(load_config(config_file, environ=environ)) as services:
            assert services.transcriber is not None
            text = await services.transcriber.transcribe(b"x", filename="v.ogg", mime=None)
        assert text == "from the speech server"
        assert main.transcriptions == [] and speech.transcriptions[0].model == "whisper-large"

"""A voice note read through the real transcription client and the fake OpenAI endpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.agent.model_client import ModelClient
from gateway.config import MediaConfig
from gateway.errors import TranscriptionError
from gateway.media import MediaReader
from gateway.messages import InboundMessage, MediaRef
from tests.fakes.openai import FakeOpenAI, Fault
from tests.gateway.media.fakes import FakeFetch

VOICE = MediaRef("voice", "file-1", mime="audio/ogg", size=4000, seconds=3.0)
NOTE = InboundMessage("telegram", "42", "private", "7", "", media=(VOICE,))


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def whisper(fake: FakeOpenAI) -> AsyncIterator[ModelClient]:
    model = ModelClient(fake.url + "/v1", None, "whisper-1", 5.0, max_retries=0)
    yield model
    await model.close()


def reader(whisper: ModelClient, fetch: FakeFetch) -> MediaReader:
    return MediaReader(
        MediaConfig(), vision=False, fetch=fetch, transcriber=whisper, describer=None
    )


async def test_the_endpoints_transcript_is_the_persons_voice_note(
    fake: FakeOpenAI, whisper: ModelClient
) -> None:
    fake.transcribe("remind me to water the plants")
    fetch = FakeFetch({"file-1": b"OggS" + b"\x01" * 4000})
    read = await reader(whisper, fetch).read(NOTE)
    assert read.text == "[voice note] remind me to water the plants"
    (sent,) = fake.transcriptions
    assert (sent.filename, sent.content_type, sent.size) == ("voice.ogg", "audio/ogg", 4004)


async def test_an_endpoint_error_is_the_transcription_line(
    fake: FakeOpenAI, whisper: ModelClient
) -> None:
    fake.fail_transcription(Fault.http(500))
    with pytest.raises(TranscriptionError) as caught:
        await reader(whisper, FakeFetch({"file-1": b"OggS"})).read(NOTE)
    assert str(caught.value).startswith("I couldn't transcribe that voice note just now.")
    assert "HTTP 500" in caught.value.detail


async def test_an_empty_transcript_is_the_no_words_line(
    fake: FakeOpenAI, whisper: ModelClient
) -> None:
    fake.fail_transcription(None)
    with pytest.raises(TranscriptionError) as caught:
        await reader(whisper, FakeFetch({"file-1": b"OggS"})).read(NOTE)
    assert caught.value.message_id == "I couldn't make out any words in that voice note."

"""ModelClient.transcribe against the fake OpenAI server: the multipart upload the real
`openai` client sends, the transcript, and failures as our ModelError tree."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator

import pytest

from gateway.agent.limits import ModelCallLimiter
from gateway.agent.model_client import ModelClient
from gateway.errors import ModelAuthError, ModelError, ModelStalledError
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault
from tests.timing import scaled

AUDIO = b"OggS\x00\x02" + bytes(range(256)) * 8


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key="sk-test") as server:
        yield server


def client(
    fake: FakeOpenAI,
    *,
    key: str = "sk-test",
    timeout: float = 5.0,
    retries: int = 0,
    limiter: ModelCallLimiter | None = None,
) -> ModelClient:
    return ModelClient(
        fake.url + "/v1",
        key,
        "whisper-1",
        timeout,
        max_retries=retries,
        stall_timeout=min(timeout, 1.0),
        limiter=limiter,
    )


async def test_the_recording_is_uploaded_as_a_file_and_its_text_returned(fake: FakeOpenAI) -> None:
    fake.transcribe("明天早上八点开会 and bring the slides")
    model = client(fake)
    text = await model.transcribe(AUDIO, filename="voice.ogg", mime="audio/ogg")
    await model.close()
    assert text == "明天早上八点开会 and bring the slides"
    (sent,) = fake.transcriptions
    assert (sent.model, sent.filename, sent.content_type) == ("whisper-1", "voice.ogg", "audio/ogg")
    assert sent.size == len(AUDIO) and sent.sha256 == hashlib.sha256(AUDIO).hexdigest()
    assert sent.response_format == "json" and sent.authorization == "Bearer sk-test"


async def test_without_a_type_the_upload_is_octet_stream(fake: FakeOpenAI) -> None:
    fake.transcribe("hi")
    model = client(fake)
    await model.transcribe(AUDIO, filename="voice.ogg", mime=None)
    await model.close()
    assert fake.transcriptions[0].content_type == "application/octet-stream"


async def test_silence_is_an_empty_text(fake: FakeOpenAI) -> None:
    fake.fail_transcription(None)  # an empty transcript
    model = client(fake)
    assert await model.transcribe(AUDIO, filename="voice.ogg", mime="audio/ogg") == ""
    await model.close()


async def test_a_server_error_is_a_model_error_with_its_status(fake: FakeOpenAI) -> None:
    fake.fail_transcription(Fault.http(500, message="whisper is down"))
    model = client(fake)
    with pytest.raises(ModelError) as caught:
        await model.transcribe(AUDIO, filename="voice.ogg", mime="audio/ogg")
    await model.close()
    assert caught.value.status == 500 and "whisper is down" in str(caught.value)


async def test_a_wrong_key_is_an_auth_error(fake: FakeOpenAI) -> None:
    model = client(fake, key="sk-wrong")
    with pytest.raises(ModelAuthError):
        await model.transcribe(AUDIO, filename="voice.ogg", mime="audio/ogg")
    await model.close()


async def test_a_server_error_is_retried_within_the_budget(fake: FakeOpenAI) -> None:
    fake.fail_transcription(Fault.http(503, retry_after_ms=10))
    fake.transcribe("second time lucky")
    model = client(fake, retries=1)
    text = await model.transcribe(AUDIO, filename="voice.ogg", mime="audio/ogg")
    await model.close()
    assert text == "second time lucky" and len(fake.transcriptions) == 2


async def test_an_endpoint_that_never_answers_times_out(fake: FakeOpenAI) -> None:
    fake.fail_transcription(Fault.stall())
    model = client(fake, timeout=0.3)
    with pytest.raises(ModelStalledError):
        async with asyncio.timeout(scaled(5)):
            await model.transcribe(AUDIO, filename="voice.ogg", mime="audio/ogg")
    await model.close()
    fake.release()


async def test_the_upload_waits_for_a_slot_of_the_shared_limiter(fake: FakeOpenAI) -> None:
    fake.transcribe("after the reply")
    limiter = ModelCallLimiter(1)
    model = client(fake, limiter=limiter)
    async with limiter.slot():
        task = asyncio.create_task(model.transcribe(AUDIO, filename="voice.ogg", mime="audio/ogg"))
        await wait_until(lambda: limiter.waiting == (1, 0), 5.0)
        assert fake.transcriptions == []
    assert await asyncio.wait_for(task, scaled(5)) == "after the reply"
    await model.close()

"""A recording's length is bounded by its bytes (on the download) and by its measured
duration (from its own header, before transcription), whatever the platform stated."""

from __future__ import annotations

import io
import struct
import wave

import pytest

from gateway.config import MediaConfig
from gateway.errors import MediaTooLargeError
from gateway.i18n import Catalogs
from gateway.media import MediaReader
from gateway.media.duration import audio_byte_cap, measured_seconds
from gateway.messages import InboundMessage, MediaRef
from tests.gateway.media.fakes import FakeFetch, FakeTranscriber

ENGLISH = Catalogs().translator("en")
CHINESE = Catalogs().translator("zh")
ONE_MINUTE = MediaConfig(max_seconds=60.0)


def wav(seconds: float, rate: int = 8000) -> bytes:
    """A silent mono 8-bit WAV of `seconds`, written by the stdlib."""
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(1)
        writer.setframerate(rate)
        writer.writeframes(b"\x80" * int(seconds * rate))
    return out.getvalue()


def audio(stated: float | None) -> InboundMessage:
    ref = MediaRef("audio", "file-audio", mime="audio/wav", name="talk.wav", seconds=stated)
    return InboundMessage("telegram", "42", "private", "7", "", media=(ref,))


def reader(fetch: FakeFetch, transcriber: FakeTranscriber) -> MediaReader:
    return MediaReader(
        ONE_MINUTE, vision=False, fetch=fetch, transcriber=transcriber, describer=None
    )


@pytest.mark.parametrize("stated", [None, 5.0], ids=["no length stated", "a false length"])
async def test_an_audio_document_over_the_limit_by_its_measured_length_is_refused(
    stated: float | None,
) -> None:
    fetch = FakeFetch({"file-audio": wav(120.0)})  # 2 minutes, 960 kB: under the byte cap
    transcriber = FakeTranscriber(["never"])
    with pytest.raises(MediaTooLargeError) as caught:
        await reader(fetch, transcriber).read(audio(stated))
    assert transcriber.uploads == []
    assert caught.value.line(ENGLISH) == (
        "That recording is too long for me: I can listen to 1 min at most."
    )
    assert "1 分钟" in caught.value.line(CHINESE)
    assert "120 s measured" in caught.value.detail


async def test_the_download_of_a_recording_is_capped_by_what_max_seconds_can_take() -> None:
    too_big = MediaTooLargeError("That file is too large for me.", detail="over the cap")
    fetch = FakeFetch(error=too_big)
    transcriber = FakeTranscriber(["never"])
    with pytest.raises(MediaTooLargeError) as caught:
        await reader(fetch, transcriber).read(audio(None))
    assert fetch.calls[0][2] == audio_byte_cap(60.0, ONE_MINUTE.max_bytes) == 3_840_000
    assert caught.value.line(ENGLISH).startswith("That recording is too long for me")
    assert transcriber.uploads == []


def test_the_byte_cap_is_never_over_max_bytes_nor_under_a_mebibyte() -> None:
    assert audio_byte_cap(600.0, 20 * 2**20) == 20 * 2**20
    assert audio_byte_cap(1.0, 20 * 2**20) == 2**20


def ogg_page(granule: int, body: bytes, serial: int = 9) -> bytes:
    header = b"OggS" + struct.pack("<BBqIII", 0, 0, granule, serial, 0, 0)
    return header + bytes([1, len(body)]) + body


def mp4(scale: int, length: int) -> bytes:
    def box(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", 8 + len(body)) + kind + body

    mvhd = box(b"mvhd", b"\x00\x00\x00\x00" + struct.pack(">IIII", 0, 0, scale, length))
    return box(b"ftyp", b"M4A \x00\x00\x00\x00") + box(b"moov", mvhd) + box(b"mdat", b"\0" * 64)


def flac(rate: int, samples: int) -> bytes:
    fields = (rate << 44) | (1 << 41) | (15 << 36) | samples
    return b"fLaC\x00\x00\x00\x22" + b"\0" * 10 + fields.to_bytes(8, "big") + b"\0" * 16


def mp3_cbr(seconds: float) -> bytes:
    frame_header = bytes([0xFF, 0xFB, 0x90, 0x00])  # MPEG-1 layer III, 128 kbit/s, 44.1 kHz
    return frame_header + b"\0" * (int(seconds * 16_000) - 4)


OPUS_HEAD = b"OpusHead\x01\x01" + struct.pack("<H", 312) + b"\0" * 8


@pytest.mark.parametrize(
    ("data", "seconds"),
    [
        (wav(30.0), 30.0),
        (wav(2.5, rate=16_000), 2.5),
        (flac(44_100, 44_100 * 7200), 7200.0),
        (ogg_page(0, OPUS_HEAD) + ogg_page(48_000 * 90 + 312, b"\0" * 40), 90.0),
        (mp4(1000, 7_200_000), 7200.0),
        (mp3_cbr(12.0), 12.0),
    ],
    ids=["wav", "wav 16k", "flac", "ogg opus", "m4a", "mp3 cbr"],
)
def test_the_length_is_read_from_the_header(data: bytes, seconds: float) -> None:
    measured = measured_seconds(data)
    assert measured is not None and abs(measured - seconds) < 0.01


@pytest.mark.parametrize("data", [b"", b"OggS" + b"\x01" * 4000, b"\x1aE\xdf\xa3webm", b"RIFF"])
def test_what_is_not_read_here_has_no_length(data: bytes) -> None:
    assert measured_seconds(data) is None

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


def amr(seconds: float, wide: bool = False) -> bytes:
    """AMR 12.2 kbit/s (AMR-WB 23.85) frames of 20 ms, as a phone's recorder stores them."""
    frame = bytes([8 << 3 | 4]) + b"\0" * 60 if wide else bytes([7 << 3 | 4]) + b"\0" * 31
    return (b"#!AMR-WB\n" if wide else b"#!AMR\n") + frame * round(seconds * 50)


def adts(seconds: float, rate_index: int = 4) -> bytes:
    """AAC in ADTS frames (44.1 kHz by default), 1,024 samples and 200 bytes each."""
    rate = (96_000, 88_200, 64_000, 48_000, 44_100, 32_000, 24_000, 22_050, 16_000)[rate_index]
    length = 200
    header = bytes([0xFF, 0xF1, 0x40 | rate_index << 2, 0x80 | length >> 11])
    header += bytes([(length >> 3) & 0xFF, (length & 7) << 5 | 0x1F, 0xFC])
    return (header + b"\0" * (length - 7)) * round(seconds * rate / 1024)


def ebml(element: int, body: bytes | None) -> bytes:
    """One EBML element; `body` None: a live recorder's unknown size (children follow)."""
    tag = element.to_bytes((element.bit_length() + 7) // 8, "big")
    if body is None:
        return tag + b"\x01\xff\xff\xff\xff\xff\xff\xff"
    return tag + (0x10000000 | len(body)).to_bytes(4, "big") + body


def webm(seconds: float, stated: float | None) -> bytes:
    """Opus in WebM: one block each second (a cluster each 30 s, block times relative);
    `stated`: Info's Duration in milliseconds (a browser's MediaRecorder writes none, and
    leaves the segment's and clusters' sizes unknown)."""
    info = ebml(0x2AD7B1, (1_000_000).to_bytes(3, "big"))
    if stated is not None:
        info += ebml(0x4489, struct.pack(">d", stated * 1000))
    head = ebml(0x1A45DFA3, ebml(0x4282, b"webm")) + ebml(0x18538067, None) + ebml(0x1549A966, info)
    clusters = b""
    for start in range(0, int(seconds) + 1, 30):
        blocks = b""
        for second in range(min(30, int(seconds) - start + 1)):
            blocks += ebml(0xA3, b"\x81" + struct.pack(">h", second * 1000) + b"\x80" + b"\0" * 40)
        clusters += ebml(0x1F43B675, None) + ebml(0xE7, (start * 1000).to_bytes(4, "big"))
        clusters += blocks
    return head + clusters


@pytest.mark.parametrize(
    ("data", "seconds"),
    [
        (wav(30.0), 30.0),
        (wav(2.5, rate=16_000), 2.5),
        (flac(44_100, 44_100 * 7200), 7200.0),
        (ogg_page(0, OPUS_HEAD) + ogg_page(48_000 * 90 + 312, b"\0" * 40), 90.0),
        (mp4(1000, 7_200_000), 7200.0),
        (mp3_cbr(12.0), 12.0),
        (amr(95.0), 95.0),
        (amr(30.0, wide=True), 30.0),
        (adts(75.0), 75.0),
        (adts(20.0, rate_index=8), 20.0),
        (webm(150.0, stated=150.0), 150.0),
        (webm(150.0, stated=None), 150.0),
        (webm(150.0, stated=3.0), 150.0),
    ],
    ids=[
        "wav",
        "wav 16k",
        "flac",
        "ogg opus",
        "m4a",
        "mp3 cbr",
        "amr",
        "amr-wb",
        "aac adts",
        "aac adts 16k",
        "webm",
        "webm from a browser's recorder",
        "webm stating less",
    ],
)
def test_the_length_is_read_from_the_header(data: bytes, seconds: float) -> None:
    measured = measured_seconds(data)
    assert measured is not None and abs(measured - seconds) < 0.07  # a frame, at most


@pytest.mark.parametrize("data", [b"", b"OggS" + b"\x01" * 4000, b"\x1aE\xdf\xa3webm", b"RIFF"])
def test_what_is_not_read_here_has_no_length(data: bytes) -> None:
    assert measured_seconds(data) is None


@pytest.mark.parametrize(
    "recording",
    [amr(120.0), adts(120.0), webm(120.0, stated=None), webm(120.0, stated=5.0)],
    ids=["amr", "aac adts", "webm with no length", "webm stating 5 s"],
)
async def test_a_recording_over_the_limit_in_any_common_format_is_not_transcribed(
    recording: bytes,
) -> None:
    """Two minutes, under the byte cap (3.84 MB for a minute): refused by what it measures."""
    assert len(recording) < audio_byte_cap(60.0, ONE_MINUTE.max_bytes)
    fetch = FakeFetch({"file-audio": recording})
    transcriber = FakeTranscriber(["never"])
    with pytest.raises(MediaTooLargeError) as caught:
        await reader(fetch, transcriber).read(audio(None))
    assert transcriber.uploads == []
    assert "120 s measured" in caught.value.detail

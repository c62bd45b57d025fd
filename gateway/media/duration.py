"""How long a recording really is, read from its container's header (no decoding, no tool).

`measured_seconds(audio)` answers for the formats phones and chat apps send: WAV (its
data bytes over its byte rate), FLAC (STREAMINFO's sample count), Ogg Opus and Ogg
Vorbis (the last page's granule position), MP4/M4A (the ``mvhd`` box) and MP3 (a
Xing/Info/VBRI frame count, else the bytes over the first frame's bit rate). It answers
None for anything else (WebM, AMR, a broken header): such a recording is then bounded
by its bytes only (`audio_byte_cap`). What the header says can lie for the containers
that state a duration (MP4, FLAC): the byte cap bounds those too.
"""

from __future__ import annotations

import struct

GENEROUS_BITRATE = 512_000
"""Bits a second no spoken recording needs more of (a 16 kHz mono WAV is 256 kbit/s, a
320 kbit/s MP3 the most MP3 carries; a voice note is 16-64 kbit/s)."""
MIN_AUDIO_BYTES = 1024 * 1024


def audio_byte_cap(max_seconds: float, max_bytes: int) -> int:
    """The most bytes a recording of `max_seconds` may have: `max_seconds` at
    `GENEROUS_BITRATE` (at least 1 MiB), never more than `max_bytes`."""
    return min(max_bytes, max(MIN_AUDIO_BYTES, int(max_seconds * GENEROUS_BITRATE / 8)))


def measured_seconds(audio: bytes) -> float | None:
    """`audio`'s length in seconds, from its header; None when the format is not one read
    here or its header is broken."""
    try:
        if audio[:4] == b"RIFF" and audio[8:12] == b"WAVE":
            return _wav(audio)
        if audio[:4] == b"fLaC":
            return _flac(audio)
        if audio[:4] == b"OggS":
            return _ogg(audio)
        if audio[4:8] == b"ftyp":
            return _mp4(audio)
        return _mp3(audio)
    except (struct.error, IndexError, ValueError, ZeroDivisionError):
        return None


def _wav(audio: bytes) -> float | None:
    """The data chunk's bytes actually present over the fmt chunk's byte rate."""
    byte_rate, at = 0, 12
    while at + 8 <= len(audio):
        kind, size = audio[at : at + 4], struct.unpack_from("<I", audio, at + 4)[0]
        if kind == b"fmt ":
            byte_rate = struct.unpack_from("<I", audio, at + 16)[0]
        elif kind == b"data":
            present = min(size, len(audio) - at - 8)  # a streamed WAV says 0xFFFFFFFF
            return present / byte_rate if byte_rate else None
        at += 8 + size + (size & 1)
    return None


def _flac(audio: bytes) -> float | None:
    """STREAMINFO (the first metadata block): 20 bits of sample rate, 36 of samples."""
    fields = int.from_bytes(audio[18:26], "big")
    rate = fields >> 44
    samples = fields & ((1 << 36) - 1)
    return samples / rate if rate and samples else None


def _ogg(audio: bytes) -> float | None:
    """The highest granule position of the first stream's pages, walked page by page
    (header, segment table, body), over Opus's 48 kHz (less its pre-skip) or Vorbis's
    stated rate."""
    body_at = 27 + audio[26]
    first = audio[body_at : body_at + 36]
    if first.startswith(b"OpusHead"):
        rate, skip = 48_000, struct.unpack_from("<H", first, 10)[0]
    elif first.startswith(b"\x01vorbis"):
        rate, skip = struct.unpack_from("<I", first, 12)[0], 0
    else:
        return None
    serial = struct.unpack_from("<I", audio, 14)[0]
    granule, at = 0, 0
    while audio[at : at + 4] == b"OggS":
        segments = audio[at + 26]
        body = sum(audio[at + 27 : at + 27 + segments])
        page_granule, page_serial = struct.unpack_from("<qI", audio, at + 6)
        if page_serial == serial and page_granule > granule:
            granule = page_granule
        at += 27 + segments + body
    return max(0, granule - skip) / rate if rate else None


def _mp4(audio: bytes) -> float | None:
    """``moov/mvhd``: the movie's duration over its time scale."""
    moov = _box(audio, 0, len(audio), b"moov")
    if moov is None:
        return None
    mvhd = _box(audio, *moov, b"mvhd")
    if mvhd is None:
        return None
    at = mvhd[0]
    if audio[at] == 1:  # version 1: 64-bit times
        scale, length = struct.unpack_from(">IQ", audio, at + 20)
    else:
        scale, length = struct.unpack_from(">II", audio, at + 12)
    return length / scale if scale else None


def _box(audio: bytes, start: int, end: int, kind: bytes) -> tuple[int, int] | None:
    """The (start, end) of the body of the first `kind` box between `start` and `end`."""
    at = start
    while at + 8 <= end:
        size, name = struct.unpack_from(">I4s", audio, at)
        header = 8
        if size == 1:
            size, header = struct.unpack_from(">Q", audio, at + 8)[0], 16
        elif size == 0:
            size = end - at
        if size < header:
            return None
        if name == kind:
            return at + header, min(end, at + size)
        at += size
    return None


_MP3_BITRATES = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320)
_MP3_BITRATES_LOW = (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160)
_MP3_RATES = {3: (44_100, 48_000, 32_000), 2: (22_050, 24_000, 16_000), 0: (11_025, 12_000, 8_000)}


def _mp3(audio: bytes) -> float | None:
    """MPEG layer III: the frame count of a Xing/Info/VBRI header, else (constant bit
    rate) the bytes after the first frame's header over its bit rate."""
    at = 0
    if audio[:3] == b"ID3":  # a tag first: its size is 4 bytes of 7 bits
        size = sum((audio[6 + n] & 0x7F) << (21 - 7 * n) for n in range(4))
        at = 10 + size
    header = int.from_bytes(audio[at : at + 4], "big")
    version, layer = (header >> 19) & 3, (header >> 17) & 3
    if header >> 21 != 0x7FF or layer != 1 or version == 1:
        return None
    bitrate_index, rate_index = (header >> 12) & 15, (header >> 10) & 3
    if bitrate_index in (0, 15) or rate_index == 3:
        return None
    rate = _MP3_RATES[version][rate_index]
    per_frame = 1152 if version == 3 else 576
    frames = _mp3_frame_count(audio[at : at + 200])
    if frames is not None:
        return frames * per_frame / rate
    table = _MP3_BITRATES if version == 3 else _MP3_BITRATES_LOW
    return (len(audio) - at) * 8 / (table[bitrate_index] * 1000)


def _mp3_frame_count(frame: bytes) -> int | None:
    for tag in (b"Xing", b"Info"):
        at = frame.find(tag)
        if at > 0 and struct.unpack_from(">I", frame, at + 4)[0] & 1:
            return int(struct.unpack_from(">I", frame, at + 8)[0])
    at = frame.find(b"VBRI")
    if at > 0:
        return int(struct.unpack_from(">I", frame, at + 14)[0])
    return None

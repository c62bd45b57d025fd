"""How long a recording really is, read from its container's header (no decoding, no tool).

`measured_seconds(audio)` answers for the formats phones and chat apps send: WAV (its
data bytes over its byte rate), FLAC (STREAMINFO's sample count), Ogg Opus and Ogg
Vorbis (the last page's granule position), MP4/M4A (the ``mvhd`` box), MP3 (a
Xing/Info/VBRI frame count, else the bytes over the first frame's bit rate), AMR and
AMR-WB (20 ms frames, counted), AAC in ADTS frames (1,024 samples each, counted) and
WebM/Matroska (the later of the stated duration and the last block's time: a browser's
recorder states none). It answers None for anything else (a broken header): such a
recording is then bounded by its bytes only (`audio_byte_cap`). What the header says can
lie for the containers that state a duration (MP4, FLAC): the byte cap bounds those too.
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
        if audio.startswith(_AMR_NB) or audio.startswith(_AMR_WB):
            return _amr(audio)
        if audio[:4] == b"\x1a\x45\xdf\xa3":
            return _matroska(audio)
        if len(audio) > 1 and audio[0] == 0xFF and audio[1] & 0xF6 == 0xF0:  # layer 0: ADTS
            return _adts(audio)
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


_AMR_NB, _AMR_WB = b"#!AMR\n", b"#!AMR-WB\n"
# a frame's bytes (its one-byte header included) by frame type; 1 for no data
_AMR_NB_FRAMES = (13, 14, 16, 18, 20, 21, 27, 32, 6, 1, 1, 1, 1, 1, 1, 1)
_AMR_WB_FRAMES = (18, 24, 33, 37, 41, 47, 51, 59, 61, 6, 1, 1, 1, 1, 1, 1)


def _amr(audio: bytes) -> float | None:
    """AMR (RFC 4867 storage format): frames of 20 ms, each sized by its header's type."""
    wide = audio.startswith(_AMR_WB)
    sizes, at = (_AMR_WB_FRAMES, len(_AMR_WB)) if wide else (_AMR_NB_FRAMES, len(_AMR_NB))
    frames = 0
    while at < len(audio):
        at += sizes[(audio[at] >> 3) & 15]
        frames += 1
    return frames * 0.02 if frames else None


_ADTS_RATES = (
    *(96_000, 88_200, 64_000, 48_000, 44_100, 32_000, 24_000),
    *(22_050, 16_000, 12_000, 11_025, 8_000, 7_350),
)


def _adts(audio: bytes) -> float | None:
    """AAC in ADTS frames: 1,024 samples per raw data block, at the header's sample rate."""
    samples, rate, at = 0, 0, 0
    while at + 7 <= len(audio) and audio[at] == 0xFF and audio[at + 1] & 0xF6 == 0xF0:
        rate_index = (audio[at + 2] >> 2) & 15
        length = ((audio[at + 3] & 3) << 11) | (audio[at + 4] << 3) | (audio[at + 5] >> 5)
        if rate_index >= len(_ADTS_RATES) or length < 7:
            break
        rate = _ADTS_RATES[rate_index]
        samples += 1024 * ((audio[at + 6] & 3) + 1)
        at += length
    return samples / rate if samples and rate else None


# Matroska element ids walked into (their children read in place, whatever their size,
# so a live recording's unknown sizes do not matter): Segment, Info, Cluster, BlockGroup
_MKV_INSIDE = {0x18538067, 0x1549A966, 0x1F43B675, 0xA0}
_MKV_SCALE, _MKV_DURATION, _MKV_TIMECODE = 0x2AD7B1, 0x4489, 0xE7
_MKV_BLOCKS = {0xA3, 0xA1}  # SimpleBlock, Block: track number, then 16 bits of time


def _matroska(audio: bytes) -> float | None:
    """WebM/Matroska: the later of Info's Duration and the last block's time (the
    cluster's timecode plus the block's own), in TimecodeScale units of nanoseconds."""
    scale, stated, cluster, latest, at = 1_000_000, 0.0, 0, 0, 0
    while at < len(audio):
        element, at = _vint(audio, at, keep_marker=True)
        size, at = _vint(audio, at)
        if element in _MKV_INSIDE:
            continue
        body = audio[at : at + size] if size >= 0 else b""
        if element == _MKV_SCALE:
            scale = int.from_bytes(body, "big") or scale
        elif element == _MKV_DURATION and len(body) in (4, 8):
            stated = struct.unpack(">f" if len(body) == 4 else ">d", body)[0]
        elif element == _MKV_TIMECODE:
            cluster = int.from_bytes(body, "big")
        elif element in _MKV_BLOCKS and body:
            _, after = _vint(body, 0)
            latest = max(latest, cluster + struct.unpack_from(">h", body, after)[0])
        if size < 0:
            return None  # an unknown size on anything but a container: not walkable
        at += size
    seconds = max(stated, float(latest)) * scale / 1e9
    return seconds or None


def _vint(data: bytes, at: int, keep_marker: bool = False) -> tuple[int, int]:
    """An EBML variable-length integer at `at` and where the next begins; a size of all
    ones (unknown) is -1. Ids keep their length marker, as the specification writes them."""
    first = data[at]
    length = 9 - first.bit_length()
    if not 1 <= length <= 8:
        raise ValueError("not an EBML number")
    raw = int.from_bytes(data[at : at + length], "big")
    if keep_marker:
        return raw, at + length
    value = raw & ((1 << (7 * length)) - 1)
    return (-1 if value == (1 << (7 * length)) - 1 else value), at + length

"""Pictures made for the media tests, in memory: a phone photo with GPS, a bomb, garbage."""

from __future__ import annotations

import base64
import io
import random
import struct
import zlib

from PIL import Image

GPS_IFD = 0x8825
ORIENTATION = 0x0112
MAKE = 0x010F


def phone_photo(
    size: tuple[int, int] = (3000, 2000), orientation: int = 1, noisy: bool = False
) -> bytes:
    """A JPEG as a phone writes it: EXIF with the camera, a GPS position and `orientation`.
    Its left half is red and its right half blue (noise on top when `noisy`, to make a
    decode that takes a while)."""
    width, height = size
    image = Image.new("RGB", size, (220, 20, 20))
    image.paste((20, 20, 220), (width // 2, 0, width, height))
    if noisy:
        rng = random.Random(7)
        noise = Image.frombytes("L", size, rng.randbytes(width * height))
        image = Image.blend(image, Image.merge("RGB", (noise, noise, noise)), 0.3)
    exif = Image.Exif()
    exif[MAKE] = "PhoneMaker"
    exif[ORIENTATION] = orientation
    exif[GPS_IFD] = {1: "N", 2: (52.0, 22.0, 8.0), 3: "E", 4: (4.0, 53.0, 44.0)}
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90, exif=exif)
    return out.getvalue()


def png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def claimed_png(width: int, height: int) -> bytes:
    """A PNG whose header claims `width` x `height` RGB pixels, with one short data chunk."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 1024))
        + chunk(b"IEND", b"")
    )


def decoded(data_url: str) -> Image.Image:
    """The picture a ``data:image/jpeg;base64,`` URL holds, decoded."""
    prefix = "data:image/jpeg;base64,"
    assert data_url.startswith(prefix)
    image = Image.open(io.BytesIO(base64.b64decode(data_url[len(prefix) :])))
    image.load()
    return image


def plain_png(width: int, height: int, color_type: int = 2) -> bytes:
    """A valid PNG of `width` x `height` black pixels (`color_type` 2: RGB, 6: RGBA, 0:
    grey), made row by row: a few hundred kB however large, without an image in memory."""
    channels = {0: 1, 2: 3, 6: 4}[color_type]

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    packer = zlib.compressobj(9)
    row = b"\x00" * (1 + width * channels)
    data = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")
    )

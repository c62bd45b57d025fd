"""A picture's bytes to the data URL the model is shown: checked, turned upright, stripped
of its metadata, scaled down and re-encoded as JPEG (Pillow).

`picture_data_url` is synchronous and CPU-bound: the reader runs it in a thread
(`asyncio.to_thread`), never on the event loop. It works on the bytes in memory
and writes nothing to disk.

A decompression bomb (a small file that decodes to a huge image) is refused from
the size the file's header claims, read by `Image.open` before any pixel is
decoded: over `max_pixels` it is never loaded. Pillow's own guard
(`Image.MAX_IMAGE_PIXELS`, about 89 Mpx, left as it is: it is process-wide) sits
above that cap, so whatever would trip its warning is refused by ours first, and
its error (twice that size, raised by `Image.open`) is refused the same way.

A picture is decoded under a memory budget: after `Image.open` has read the header (and,
for a JPEG, `Image.draft` has chosen to decode at 1/2, 1/4 or 1/8 scale, near the side
the model needs), what its decode will hold (`decode_bytes`: its pixels as Pillow stores
them, plus the full-size working copy the scaling makes of a palette picture or one with
transparency) is checked against `max_decode_bytes` before one pixel is decoded; over
it, the picture is refused with the same line as a bomb. The decoded image is then
scaled down in place (the full-size pixels are dropped as soon as the smaller ones
exist), and only then turned and flattened, so every copy after the decode is small.
The re-encoded picture carries no EXIF (GPS position, camera, time), XMP or ICC
data: only its pixels, turned as the EXIF orientation said.
"""

from __future__ import annotations

import base64
import io
import struct

from PIL import Image, ImageOps

from gateway.errors import ImageUnreadableError
from gateway.i18n import N_

MAX_PIXELS = 50_000_000
"""The most pixels a picture may claim (a 12 Mpx phone photo is far below; 50 Mpx of RGB
is 150 MB while it is decoded)."""
MAX_DECODE_BYTES = 48 * 1024 * 1024
"""The most memory one picture's decode may hold (a 12 Mpx PNG photo, 4000x3000 of RGB,
holds 48 MB; one with transparency 96 MB and is refused, as a 7000x7000 PNG holding 196
MB; a JPEG of any size up to `MAX_PIXELS` fits, decoded at a reduced scale). Scaling
adds about half of it while the decoded pixels are held; with the reader's two decodes
at once, four big pictures together stay under 200 MB (bench/media_memory.py)."""
JPEG_QUALITY = 85
FORMATS = ("JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF")  # JPEG covers MPO too
"""What phones and chat apps send; any other decoder Pillow has stays unused."""

UNREADABLE = N_("I couldn't open that picture. Please send it as a photo (JPEG or PNG).")
TOO_MANY_PIXELS = N_("That picture is too large for me to open. Please send a smaller one.")

# What Pillow raises on a file it cannot decode: not an image, truncated, a broken chunk.
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error)


def picture_data_url(
    data: bytes,
    *,
    max_side: int,
    max_pixels: int = MAX_PIXELS,
    max_decode_bytes: int = MAX_DECODE_BYTES,
) -> str:
    """`data` as a ``data:image/jpeg;base64,…`` URL whose longer side is at most `max_side`.

    Raises `ImageUnreadableError`: not a picture Pillow reads (of `FORMATS`), broken,
    more than `max_pixels` pixels, or a decode holding more than `max_decode_bytes`
    (both checked before decoding).
    """
    jpeg = _jpeg(data, max_side, max_pixels, max_decode_bytes)
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def decode_bytes(mode: str, size: tuple[int, int]) -> int:
    """What decoding and scaling a `mode` picture of `size` holds at most: its pixels as
    Pillow stores them (1 byte for 1, L and P; 4 for the rest) and, for a palette or
    bilevel picture (turned into RGB(A) or L to be scaled smoothly) and for one with
    transparency (scaled premultiplied), a full-size working copy of 4 bytes a pixel each."""
    width, height = size
    stored = 1 if mode in ("1", "L", "P") else 4
    copies = {"1": 4, "P": 8, "PA": 8, "LA": 4, "RGBA": 4}.get(mode, 0)
    return width * height * (stored + copies)


def _jpeg(data: bytes, max_side: int, max_pixels: int, max_decode_bytes: int) -> bytes:
    try:
        with Image.open(io.BytesIO(data), formats=FORMATS) as image:
            _check_pixels(image.size, max_pixels)
            image.draft(None, (max_side, max_side))  # JPEG: decode at a reduced scale
            _check_budget(image, max_decode_bytes)
            image.load()
            _check_pixels(image.size, max_pixels)
            picture = _scaled(image, max_side)
            picture = _flattened(ImageOps.exif_transpose(picture))
    except (Image.DecompressionBombError, MemoryError) as exc:
        raise ImageUnreadableError(TOO_MANY_PIXELS, detail=str(exc) or "out of memory") from None
    except _DECODE_ERRORS as exc:
        raise ImageUnreadableError(UNREADABLE, detail=f"{type(exc).__name__}: {exc}") from None
    picture.info.clear()  # nothing of the original file's metadata goes on
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=JPEG_QUALITY, optimize=True)
    return out.getvalue()


def _check_pixels(size: tuple[int, int], max_pixels: int) -> None:
    width, height = size
    if width <= 0 or height <= 0:
        raise ImageUnreadableError(UNREADABLE, detail=f"claims {width}x{height} pixels")
    if width * height > max_pixels:
        raise ImageUnreadableError(
            TOO_MANY_PIXELS, detail=f"claims {width}x{height} pixels, over {max_pixels}"
        )


def _check_budget(image: Image.Image, max_decode_bytes: int) -> None:
    need = decode_bytes(image.mode, image.size)
    if need > max_decode_bytes:
        width, height = image.size
        raise ImageUnreadableError(
            TOO_MANY_PIXELS,
            detail=f"{width}x{height} {image.mode} would hold {need // 2**20} MiB to decode, "
            f"over {max_decode_bytes // 2**20} MiB",
        )


def _scaled(image: Image.Image, max_side: int) -> Image.Image:
    """The decoded `image` with its longer side at most `max_side`, scaled in place when it
    can be (its full-size pixels go as soon as the smaller ones exist)."""
    if max(image.size) <= max_side:
        return image
    if image.mode in ("1", "P", "PA"):  # Pillow scales these by nearest pixel only
        smooth = "RGBA" if image.mode == "PA" or "transparency" in image.info else "RGB"
        if image.mode == "1":
            smooth = "L"
        converted = image.convert(smooth)
        converted.info = dict(image.info)  # the EXIF orientation still applies
        image = converted
    # reducing_gap 1: first a box reduction by the whole factor (a small new image), then
    # Lanczos over the rest, so the full-height intermediate of a separable resize is small
    image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS, reducing_gap=1.0)
    return image


def _flattened(image: Image.Image) -> Image.Image:
    """A new RGB image of `image`'s pixels; transparency shows as white, not black."""
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, "white")
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    return image.convert("RGB")

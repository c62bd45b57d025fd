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
JPEG_QUALITY = 85
FORMATS = ("JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF")  # JPEG covers MPO too
"""What phones and chat apps send; any other decoder Pillow has stays unused."""

UNREADABLE = N_("I couldn't open that picture. Please send it as a photo (JPEG or PNG).")
TOO_MANY_PIXELS = N_("That picture is too large for me to open. Please send a smaller one.")

# What Pillow raises on a file it cannot decode: not an image, truncated, a broken chunk.
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error)


def picture_data_url(data: bytes, *, max_side: int, max_pixels: int = MAX_PIXELS) -> str:
    """`data` as a ``data:image/jpeg;base64,…`` URL whose longer side is at most `max_side`.

    Raises `ImageUnreadableError`: not a picture Pillow reads (of `FORMATS`), broken,
    or more than `max_pixels` pixels (checked before decoding).
    """
    return "data:image/jpeg;base64," + base64.b64encode(_jpeg(data, max_side, max_pixels)).decode(
        "ascii"
    )


def _jpeg(data: bytes, max_side: int, max_pixels: int) -> bytes:
    try:
        with Image.open(io.BytesIO(data), formats=FORMATS) as image:
            _check_pixels(image.size, max_pixels)
            image.draft(None, (max_side, max_side))  # JPEG: decode at a reduced scale
            image.load()
            _check_pixels(image.size, max_pixels)
            picture = _flattened(ImageOps.exif_transpose(image))
    except (Image.DecompressionBombError, MemoryError) as exc:
        raise ImageUnreadableError(TOO_MANY_PIXELS, detail=str(exc) or "out of memory") from None
    except _DECODE_ERRORS as exc:
        raise ImageUnreadableError(UNREADABLE, detail=f"{type(exc).__name__}: {exc}") from None
    picture.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
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


def _flattened(image: Image.Image) -> Image.Image:
    """A new RGB image of `image`'s pixels; transparency shows as white, not black."""
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, "white")
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    return image.convert("RGB")

"""Benchmark: the memory a picture's decode holds, one and four at once, under the limits.

Makes the worst pictures the media reader accepts (each just under its per-picture
decode budget `images.MAX_DECODE_BYTES`, or at the pixel cap for a JPEG, which is
decoded at a reduced scale) and, for each, runs in a fresh child process: the real
`MediaReader` (vision on, no describer) reading one message with that picture, then
four people's messages at once. The child prints its resident memory when idle (the
application imported, the pictures' bytes loaded) and its peak (``VmHWM`` of
/proc/self/status); the figure is the peak above idle. Beside them, the path before
issue 36 (decode whole, turn, flatten, then scale) on the 7000x7000 PNG of the report,
one at a time (four at once took 3.4 GB and is not run). The goal: four at once at most
200 MB above idle.

    python bench/media_memory.py
"""

from __future__ import annotations

import argparse
import asyncio
import io
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

PICTURES = {
    "png-rgb-3547x3547": ("png", 3547, 3547, 2),
    "png-rgba-2508x2508": ("png", 2508, 2508, 6),
    "png-palette-2364x2364": ("png", 2364, 2364, 3),
    "jpeg-8660x5773": ("jpeg", 8660, 5773, 0),
    "old-png-rgb-7000x7000": ("png", 7000, 7000, 2),
}


def plain_png(width: int, height: int, color_type: int) -> bytes:
    """A valid PNG of grey ramps, made row by row (no image held in memory)."""
    channels = {2: 3, 3: 1, 6: 4}[color_type]

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    palette = chunk(b"PLTE", bytes(v for n in range(256) for v in (n, n, 255 - n)))
    row = b"\x00" + bytes(n % 256 for n in range(width * channels))
    packer = zlib.compressobj(6)
    data = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    extra = palette if color_type == 3 else b""
    idat = chunk(b"IDAT", data)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + extra + idat + chunk(b"IEND", b"")


def big_jpeg(width: int, height: int) -> bytes:
    from PIL import Image

    ramp = Image.linear_gradient("L").resize((width, height))
    image = Image.merge("RGB", (ramp, ramp.transpose(Image.Transpose.FLIP_LEFT_RIGHT), ramp))
    del ramp
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90)
    return out.getvalue()


def status(field: str) -> int:
    """A ``Vm…`` line of /proc/self/status, in kB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def old_decode(data: bytes, max_side: int) -> str:
    """The decode before issue 36: whole picture, turned, flattened, then scaled."""
    import base64

    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(data)) as image:
        image.draft(None, (max_side, max_side))
        image.load()
        turned = ImageOps.exif_transpose(image)
        if turned.mode in ("RGBA", "LA", "PA") or "transparency" in turned.info:
            rgba = turned.convert("RGBA")
            picture = Image.new("RGB", rgba.size, "white")
            picture.paste(rgba, mask=rgba.getchannel("A"))
        else:
            picture = turned.convert("RGB")
    picture.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=85)
    return base64.b64encode(out.getvalue()).decode("ascii")


async def child(path: Path, count: int, old: bool) -> None:
    from gateway.config import MediaConfig
    from gateway.media import MediaReader
    from gateway.messages import InboundMessage, MediaRef

    data = path.read_bytes()

    async def fetch(platform: str, media: MediaRef, max_bytes: int) -> bytes:
        return data

    decode = old_decode if old else None
    reader = MediaReader(
        MediaConfig(), vision=True, fetch=fetch, transcriber=None, describer=None, decode=decode
    )
    if old:  # the old reader had no bound: as many threads as pictures
        reader = MediaReader(
            MediaConfig(),
            vision=True,
            fetch=fetch,
            transcriber=None,
            describer=None,
            decode=decode,
            max_decoding=count,
        )
    ref = MediaRef("image", "file", mime="image/png")
    messages = [
        InboundMessage("telegram", str(n), "private", str(n), "", media=(ref,))
        for n in range(count)
    ]
    idle = status("VmRSS")
    read = await asyncio.gather(*(reader.read(message) for message in messages))
    assert all(len(each.images) == 1 for each in read)
    print(idle, status("VmHWM"))


def measure(path: Path, count: int, old: bool) -> tuple[int, int]:
    command = [sys.executable, __file__, "--child", str(path), "--count", str(count)]
    out = subprocess.run(command + (["--old"] if old else []), capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    idle, peak = (int(value) for value in out.stdout.split())
    return idle, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--old", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        asyncio.run(child(args.child, args.count, args.old))
        return
    print(describe())
    print(f"{'picture':<24} {'file':>9} {'at once':>7} {'idle MB':>8} {'peak MB':>8} {'above':>7}")
    with tempfile.TemporaryDirectory() as folder:
        for name, (kind, width, height, color_type) in PICTURES.items():
            path = Path(folder) / name
            data = (
                big_jpeg(width, height) if kind == "jpeg" else plain_png(width, height, color_type)
            )
            path.write_bytes(data)
            old = name.startswith("old-")
            for count in (1,) if old else (1, 4):
                idle, peak = measure(path, count, old)
                print(
                    f"{name:<24} {len(data) // 1024:>7}kB {count:>7} {idle / 1024:>8.0f} "
                    f"{peak / 1024:>8.0f} {(peak - idle) / 1024:>7.0f}"
                )


if __name__ == "__main__":
    main()

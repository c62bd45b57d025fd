"""Pictures decoded under a memory budget: refused by what their decode would hold before a
pixel is decoded, scaled while decoding, and a bounded number decoded at once."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

import pytest

from gateway.config import MediaConfig
from gateway.errors import ImageUnreadableError
from gateway.i18n import Catalogs
from gateway.media import MediaReader
from gateway.media.images import MAX_DECODE_BYTES, TOO_MANY_PIXELS, decode_bytes
from gateway.media.images import picture_data_url as real_decode
from gateway.media.reader import Decode
from gateway.messages import InboundMessage, MediaRef
from tests.gateway.media.fakes import FakeFetch
from tests.gateway.media.samples import plain_png
from tests.timing import scaled

ENGLISH = Catalogs().translator("en")
SPANISH = Catalogs().translator("es")
CHINESE = Catalogs().translator("zh")


def photos(count: int) -> InboundMessage:
    media = tuple(MediaRef("image", f"file-{n}", mime="image/png") for n in range(count))
    return InboundMessage("telegram", "42", "private", "7", "", media=media)


def photo(n: int) -> InboundMessage:
    media = (MediaRef("image", f"file-{n}", mime="image/png"),)
    return InboundMessage("telegram", str(40 + n), "private", str(n), "", media=media)


def reader(fetch: FakeFetch, decode: Decode | None = None, max_decoding: int = 2) -> MediaReader:
    return MediaReader(
        MediaConfig(),
        vision=True,
        fetch=fetch,
        transcriber=None,
        describer=None,
        decode=decode,
        max_decoding=max_decoding,
    )


async def test_a_7000_square_png_is_refused_in_the_persons_language_before_it_is_decoded() -> None:
    big = plain_png(7000, 7000)  # 49 Mpx: under the pixel cap, 196 MB to decode
    assert len(big) < 400_000
    with pytest.raises(ImageUnreadableError) as caught:
        await reader(FakeFetch({"file-0": big})).read(photos(1))
    assert caught.value.message_id == TOO_MANY_PIXELS
    assert caught.value.line(ENGLISH) == TOO_MANY_PIXELS
    assert caught.value.line(SPANISH) != TOO_MANY_PIXELS != caught.value.line(CHINESE)
    assert "7000x7000 RGB would hold 186 MiB" in caught.value.detail


def test_the_budget_counts_the_working_copy_of_palette_and_transparent_pictures() -> None:
    # 3000x3000: fits as RGB (36 MB) but not with transparency (72 MB) nor as a palette.
    assert decode_bytes("RGB", (3000, 3000)) <= MAX_DECODE_BYTES
    assert decode_bytes("RGBA", (3000, 3000)) > MAX_DECODE_BYTES
    assert decode_bytes("P", (3000, 3000)) > MAX_DECODE_BYTES
    assert real_decode(plain_png(3000, 3000), max_side=1568)
    with pytest.raises(ImageUnreadableError) as caught:
        real_decode(plain_png(3000, 3000, color_type=6), max_side=1568)
    assert "RGBA would hold" in caught.value.detail


@dataclass
class CountingDecoder:
    """Decodes nothing: counts how many are inside at once and holds each until `release`."""

    release: threading.Event = field(default_factory=threading.Event)
    inside: int = 0
    most: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, data: bytes, max_side: int) -> str:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            assert self.release.wait(timeout=scaled(30))
            return "data:image/jpeg;base64,AA=="
        finally:
            with self.lock:
                self.inside -= 1


async def test_four_pictures_at_once_are_decoded_two_at_a_time() -> None:
    fetch = FakeFetch({f"file-{n}": b"picture" for n in range(4)})
    decoder = CountingDecoder()
    bot = reader(fetch, decode=decoder)  # one reader, four people's pictures at once
    tasks = [asyncio.create_task(bot.read(photo(n))) for n in range(4)]
    async with asyncio.timeout(scaled(30)):
        while not (fetch.done == 4 and decoder.inside >= 2):
            await asyncio.sleep(0)
    # every download is back: the other two reads wait for the reader, not for a thread
    assert decoder.most == 2
    decoder.release.set()
    async with asyncio.timeout(scaled(30)):
        read = await asyncio.gather(*tasks)
    assert [len(each.images) for each in read] == [1, 1, 1, 1]
    assert decoder.most == 2


async def test_the_bound_is_the_readers_to_set() -> None:
    fetch = FakeFetch({f"file-{n}": b"picture" for n in range(3)})
    decoder = CountingDecoder()
    decoder.release.set()
    read = await reader(fetch, decode=decoder, max_decoding=1).read(photos(3))
    assert len(read.images) == 3 and decoder.most == 1

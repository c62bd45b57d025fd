"""A picture's bytes to what the model is shown: scaled, upright, without metadata; broken
pictures and decompression bombs refused before they are decoded."""

from __future__ import annotations

import base64
import io
import time

import pytest
from PIL import Image

from gateway.errors import ImageUnreadableError
from gateway.media.images import TOO_MANY_PIXELS, UNREADABLE, picture_data_url
from tests.gateway.media.samples import claimed_png, decoded, phone_photo, png
from tests.timing import scaled


def test_a_phone_photo_is_scaled_to_the_side_and_loses_its_exif_and_gps() -> None:
    original = phone_photo((3000, 2000))
    assert Image.open(io.BytesIO(original)).getexif().get_ifd(0x8825)
    url = picture_data_url(original, max_side=1568)
    picture = decoded(url)
    assert picture.format == "JPEG" and picture.mode == "RGB"
    assert picture.size == (1568, 1045)
    assert not picture.getexif() and "exif" not in picture.info
    raw = base64.b64decode(url.split(",", 1)[1])
    assert b"Exif" not in raw and b"PhoneMaker" not in raw
    left, right = picture.getpixel((10, 500)), picture.getpixel((1550, 500))
    assert isinstance(left, tuple) and isinstance(right, tuple)
    assert left[0] > 180 and right[2] > 180  # red stays left, blue right


def test_a_small_picture_keeps_its_size() -> None:
    picture = decoded(picture_data_url(phone_photo((640, 480)), max_side=1568))
    assert picture.size == (640, 480)


def test_the_exif_orientation_is_applied_before_it_is_dropped() -> None:
    # Orientation 6: the camera was turned; shown upright, the red left half is on top.
    picture = decoded(picture_data_url(phone_photo((300, 200), orientation=6), max_side=1568))
    assert picture.size == (200, 300)
    top, bottom = picture.getpixel((100, 10)), picture.getpixel((100, 290))
    assert isinstance(top, tuple) and isinstance(bottom, tuple)
    assert top[0] > 180 and bottom[2] > 180


def test_transparency_becomes_white_not_black() -> None:
    image = Image.new("RGBA", (40, 40), (0, 0, 0, 0))
    picture = decoded(picture_data_url(png(image), max_side=1568))
    pixel = picture.getpixel((20, 20))
    assert isinstance(pixel, tuple) and min(pixel) > 240


@pytest.mark.parametrize(
    "data",
    [b"", b"not a picture at all", phone_photo((400, 300))[:600], b"GIF89a" + b"\x00" * 20],
    ids=["empty", "text", "truncated-jpeg", "broken-gif"],
)
def test_what_pillow_cannot_open_is_refused(data: bytes) -> None:
    with pytest.raises(ImageUnreadableError) as caught:
        picture_data_url(data, max_side=1568)
    assert caught.value.message_id == UNREADABLE


def test_a_format_outside_the_list_is_refused_even_when_pillow_could_read_it() -> None:
    image = Image.new("RGB", (20, 20), "green")
    out = io.BytesIO()
    image.save(out, format="PPM")
    with pytest.raises(ImageUnreadableError) as caught:
        picture_data_url(out.getvalue(), max_side=1568)
    assert caught.value.message_id == UNREADABLE


def test_a_header_claiming_ten_gigapixels_is_refused_fast_without_decoding() -> None:
    bomb = claimed_png(100_000, 100_000)  # 30 GB of RGB, in 1 kB
    limit = Image.MAX_IMAGE_PIXELS
    began = time.monotonic()
    with pytest.raises(ImageUnreadableError) as caught:
        picture_data_url(bomb, max_side=1568)
    assert time.monotonic() - began < scaled(1.0)  # decoding it could not even start
    assert caught.value.message_id == TOO_MANY_PIXELS
    assert limit == Image.MAX_IMAGE_PIXELS  # the process-wide guard is left as it was


def test_a_real_highly_compressed_picture_over_the_cap_is_refused_before_it_is_decoded() -> None:
    # 64 Mpx of one colour: valid, 8 kB as a PNG, under Pillow's own guard but over ours.
    bomb = png(Image.new("1", (8000, 8000)))
    assert len(bomb) < 100_000
    with pytest.raises(ImageUnreadableError) as caught:
        picture_data_url(bomb, max_side=1568)
    assert caught.value.message_id == TOO_MANY_PIXELS
    assert "8000x8000" in caught.value.detail


def test_the_pixel_cap_is_the_callers() -> None:
    photo = phone_photo((400, 300))
    with pytest.raises(ImageUnreadableError):
        picture_data_url(photo, max_side=1568, max_pixels=400 * 300 - 1)
    assert decoded(picture_data_url(photo, max_side=1568, max_pixels=400 * 300)).size == (400, 300)

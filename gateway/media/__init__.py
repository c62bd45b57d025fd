"""Voice notes, audio and pictures: from a platform's file to what a turn stores and shows.

`MediaReader.read(message)` downloads each `MediaRef` of a message through its
adapter (`Adapter.fetch_media`, capped at ``media.max_bytes``), transcribes
sound through an OpenAI-compatible ``/audio/transcriptions`` endpoint, and
decodes, checks and scales pictures with Pillow (off the event loop); it
returns `ReadMedia`: the text the person's message is stored as (caption and
transcript, with the markers of `gateway.media.markers`) and the pictures to
show the model in this turn only. Any failure is a `MediaError` carrying the
one line the person gets; nothing is kept of the message then. Media is held
in memory only, never written to disk.
"""

from gateway.media.markers import (
    IMAGE_PREFIX,
    NOT_SHOWN_MARK,
    VOICE_PREFIX,
    image_line,
    spoken_text,
    without_image_lines,
)
from gateway.media.reader import MediaReader, ReadMedia

__all__ = [
    "IMAGE_PREFIX",
    "NOT_SHOWN_MARK",
    "VOICE_PREFIX",
    "MediaReader",
    "ReadMedia",
    "image_line",
    "spoken_text",
    "without_image_lines",
]

"""How a voice note and a picture are kept in a person's stored message.

The stored text is what later turns, `/recall` and the export see, so it says
what the message was: a transcript starts with `VOICE_PREFIX` ("[voice note] …",
the person's own words, learned from like typed text); a picture adds one line
`image_line(description)` ("[image: a red bicycle by a canal]", written by the
auxiliary model, so NOT the person's words: the learning check leaves such
lines out, as it leaves out quoted lines); a picture the model could not be
shown adds `NOT_SHOWN_MARK`. The markers are English on purpose: they are
model-facing, and the stored bytes must not depend on anyone's language.
"""

from __future__ import annotations

VOICE_PREFIX = "[voice note] "
IMAGE_PREFIX = "[image: "
NOT_SHOWN_MARK = "[an image was attached; it could not be shown to you]"


def spoken_text(transcript: str) -> str:
    """A transcript as stored: the marker, then what was heard."""
    return VOICE_PREFIX + " ".join(transcript.split())


def image_line(description: str) -> str:
    """The stored line for a picture the model was shown, by its short description (kept
    on one line, without a closing bracket of its own that would end the marker early)."""
    text = " ".join(description.split()).replace("]", ")")
    return f"{IMAGE_PREFIX}{text}]"


def without_image_lines(text: str) -> str:
    """`text` without the lines that describe a picture or say one was not shown: what the
    person wrote or said themselves."""
    kept = [
        line
        for line in text.split("\n")
        if not line.startswith(IMAGE_PREFIX) and line.strip() != NOT_SHOWN_MARK
    ]
    return "\n".join(kept)

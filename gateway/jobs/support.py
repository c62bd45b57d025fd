"""The person's own words, as the grounding check reads them.

`memory_core.grounding` decides whether an entry about a person is something that
person said; this module gives it what they said: their own messages of a stretch
(role ``user``, not forwarded), in order, each with its stored id, without a
picture's description (the auxiliary model wrote it) and with a voice note's
transcript kept as their words but without its marker. Quoted lines are left out by
the check itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.media.markers import VOICE_PREFIX, without_image_lines
from memory_core import Said, StoredMessage


def said_texts(messages: Sequence[StoredMessage]) -> list[Said]:
    """The person's own, not forwarded, messages of `messages`, cleaned of markers."""
    return [
        Said(m.id, _without_voice_marks(without_image_lines(m.content)))
        for m in messages
        if m.role == "user" and m.own_words
    ]


def _without_voice_marks(text: str) -> str:
    # What follows the marker that starts a transcript's line is what the person said.
    return "\n".join(line.removeprefix(VOICE_PREFIX) for line in text.split("\n"))

"""Keep `<memory-context>` spans out of what the model streams to a chat.

A model sometimes echoes the recall block it was given. `scrub_context` removes
every `<memory-context> … </memory-context>` span from a whole text;
`StreamingContextScrubber` does the same to a stream of chunks, whatever the
chunk boundaries, and its output is always exactly `scrub_context` of the
whole stream.

The rules, shared by both: tags match in any ASCII case; a span runs from an
opening tag to the next closing tag (an opening tag inside a span is just part
of the span); a span that never closes runs to the end of the text; a closing
tag outside any span is removed on its own.
"""

from __future__ import annotations

import re

from memory_core.context import CLOSE_TAG, OPEN_TAG

LONGEST_TAG = max(len(OPEN_TAG), len(CLOSE_TAG))

# ASCII so that "any case" means exactly the A-Z/a-z variants, both here and in
# the prefix test below (str.lower() of some non-ASCII letters is ASCII).
_ANY_TAG = re.compile(f"{re.escape(OPEN_TAG)}|{re.escape(CLOSE_TAG)}", re.IGNORECASE | re.ASCII)
_CLOSE = re.compile(re.escape(CLOSE_TAG), re.IGNORECASE | re.ASCII)


def scrub_context(text: str) -> str:
    """Remove every memory-context span (and any stray closing tag) from `text`."""
    out: list[str] = []
    pos = 0
    while (tag := _ANY_TAG.search(text, pos)) is not None:
        out.append(text[pos : tag.start()])
        pos = tag.end()
        if tag.group().lower() == OPEN_TAG:
            close = _CLOSE.search(text, pos)
            if close is None:
                return "".join(out)  # an unclosed span runs to the end
            pos = close.end()
    out.append(text[pos:])
    return "".join(out)


def _could_start(text: str, tags: tuple[str, ...]) -> bool:
    """Whether `text` is a proper prefix of one of `tags`, in any ASCII case."""
    lowered = text.lower()
    return text.isascii() and any(len(text) < len(tag) and tag.startswith(lowered) for tag in tags)


def _held_suffix_start(text: str, tags: tuple[str, ...]) -> int:
    """Where the longest suffix of `text` that could still become a tag starts."""
    longest = max(len(tag) for tag in tags)
    for start in range(max(0, len(text) - longest + 1), len(text)):
        if text[start] == "<" and _could_start(text[start:], tags):
            return start
    return len(text)


class StreamingContextScrubber:
    """Removes memory-context spans from a stream of text chunks.

    Feed each chunk with `feed`, show what it returns, and call `flush` once at
    the end. Outside a span at most ``LONGEST_TAG - 1`` characters are ever
    held back (the tail that might still become a tag); they are released as
    soon as the next character shows they cannot. Use one scrubber per reply.
    """

    def __init__(self) -> None:
        self._held = ""
        self._inside = False

    @property
    def inside_span(self) -> bool:
        """True while the stream is inside an unclosed span."""
        return self._inside

    def feed(self, chunk: str) -> str:
        """Take the next chunk; return the text that is safe to show now."""
        text = self._held + chunk
        out: list[str] = []
        pos = 0
        while True:
            pattern = _CLOSE if self._inside else _ANY_TAG
            tag = pattern.search(text, pos)
            if tag is None:
                break
            if not self._inside:
                out.append(text[pos : tag.start()])
            self._inside = not self._inside and tag.group().lower() == OPEN_TAG
            pos = tag.end()
        rest = text[pos:]
        awaited = (CLOSE_TAG,) if self._inside else (OPEN_TAG, CLOSE_TAG)
        cut = _held_suffix_start(rest, awaited)
        if not self._inside:
            out.append(rest[:cut])
        self._held = rest[cut:]
        return "".join(out)

    def flush(self) -> str:
        """End of stream: release held text, or drop it if a span is still open."""
        held, self._held = self._held, ""
        inside, self._inside = self._inside, False
        return "" if inside else held

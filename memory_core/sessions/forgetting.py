"""What `/forget` finds in stored conversations, and what it leaves in its place.

A person who forgets an entry names texts (the entry, the words it was learned
from); `Needles` finds each of them in stored text however it was stored: as
written, JSON-escaped once (a tool call's arguments) or twice (those arguments
inside the stored list of calls), with non-ASCII characters kept or escaped,
and with the characters the stores cannot hold (a lone surrogate, NUL) as they
stored them. Case is ignored. Every occurrence becomes `FORGOTTEN`, which is
itself never matched again, so forgetting twice changes nothing the second time.

Stored JSON (a message's tool calls, a tool's result) is changed through its
strings, never its syntax: a JSON text is decoded, each string in it (and each
JSON text inside a string, a call's arguments) changed, and the whole encoded
again, only when something changed; so a short text that also occurs in a key
or an escape sequence cannot leave a call that no longer decodes.

What it cannot find: a paraphrase, a text split over two messages, or one
escaped some other way (``\\/``, a different JSON encoder's choices).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable

from memory_core.sessions.writes import without_lone_surrogates

__all__ = ["FORGOTTEN", "Needles"]

FORGOTTEN = "[forgotten]"
_ESCAPES = 2  # a text inside a tool call's arguments, inside the stored list of calls


class Needles:
    """The texts to forget, as a pattern over stored text (blank texts are left out)."""

    def __init__(self, texts: Iterable[str]) -> None:
        forms: set[str] = set()
        for text in texts:
            if text.strip():
                forms.update(_stored_forms(text))
        alternatives = [re.escape(f) for f in sorted(forms, key=len, reverse=True)]
        self._pattern = (
            re.compile("|".join([re.escape(FORGOTTEN), *alternatives]), re.IGNORECASE)
            if alternatives
            else None
        )

    def __bool__(self) -> bool:
        return self._pattern is not None

    def holds(self, text: str | None) -> bool:
        """Whether `text` holds one of the texts."""
        return text != self.scrub(text)

    def scrub(self, text: str | None) -> str | None:
        """`text` with every occurrence of a text replaced by `FORGOTTEN` (in a JSON
        text, in its strings)."""
        if text is None or self._pattern is None:
            return text
        decoded = _json(text)
        if decoded is _NOT_JSON:
            return self._pattern.sub(_replacement, text)
        try:
            value, changed = self._walk(decoded)
        except RecursionError:  # nested past Python's stack: as plain text, then
            return self._pattern.sub(_replacement, text)
        return json.dumps(value, ensure_ascii=False) if changed else text

    def _walk(self, value: object) -> tuple[object, bool]:
        """`value` (decoded JSON) with its strings scrubbed; whether any changed."""
        if isinstance(value, str):
            scrubbed = self.scrub(value)
            return scrubbed, scrubbed != value
        if isinstance(value, list):
            items = [self._walk(item) for item in value]
            return [item for item, _ in items], any(changed for _, changed in items)
        if isinstance(value, dict):
            pairs = {key: self._walk(item) for key, item in value.items()}
            changed = any(c for _, c in pairs.values())
            return {key: item for key, (item, _) in pairs.items()}, changed
        return value, False


_NOT_JSON = object()


def _json(text: str) -> object:
    """`text` decoded when it is a JSON object or array, else `_NOT_JSON`."""
    if not text.lstrip().startswith(("{", "[")):
        return _NOT_JSON
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _replacement(match: re.Match[str]) -> str:
    return FORGOTTEN  # the marker itself is matched first, and stays as it is


def _stored_forms(text: str) -> set[str]:
    """`text` as the stores may hold it, escaped up to `_ESCAPES` times."""
    cleaned = without_lone_surrogates(text)
    forms = {text, cleaned, cleaned.replace("\x00", "\ufffd")}
    for base in list(forms):
        for levels in range(1, _ESCAPES + 1):
            for ascii_only in itertools.product((False, True), repeat=levels):
                form = base
                for flag in ascii_only:
                    form = json.dumps(form, ensure_ascii=flag)[1:-1]
                forms.add(form)
    return forms

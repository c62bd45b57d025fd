"""Small, short-lived state that every replica must see: a JSON object in a `Document`.

Replicas on one PostgreSQL keep what a person was offered and is expected to answer
(`PendingChoices`, `PendingErasures`) in a row of the ``documents`` table
(`Storage.document`), because their next update may reach another replica. A change
reads the object, edits it and writes it back in one transaction under the row's
lock (`SharedJson.changing`), so two replicas' changes never interleave. Everything
held there expires by wall-clock time (`time.time`: monotonic clocks differ per
process) and is purged at each change. The state is worth ten minutes at most: a
row that is not a JSON object is read as empty (and replaced at the next change),
with a warning, rather than stopping the commands that use it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from memory_core import Document

log = logging.getLogger(__name__)

Documents = Callable[[str], Document]
"""The shared documents by name (`Storage.document` when the storage is shared)."""


def token_digest(token: str) -> str:
    """What a shared table keeps of a token: its SHA-256, hex (a token is 128 random
    bits, so no salt is needed and a copy of the row presses no button)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class SharedJson:
    """A JSON object in `document`, read whole and changed under its lock."""

    def __init__(self, document: Document) -> None:
        self.document = document

    def read(self) -> dict[str, Any]:
        """The object as it is now ({} when nothing, or nothing usable, was written)."""
        return self._parse(self.document.read())

    @contextmanager
    def changing(self) -> Iterator[dict[str, Any]]:
        """The object, held against every other change until the block ends, then
        written back if the block changed it (nothing is written when it raises)."""
        with self.document.changing() as handle:
            text = handle.read()
            state = self._parse(text)
            yield state
            changed = json.dumps(state, sort_keys=True, separators=(",", ":"))
            if changed != text:
                handle.write(changed)

    def _parse(self, text: str | None) -> dict[str, Any]:
        if text is None:
            return {}
        try:
            state = json.loads(text)
        except ValueError:
            state = None
        if not isinstance(state, dict):
            log.warning("%s is not a JSON object; it is read as empty", self.document.label)
            return {}
        return state

"""A digest of everything a memory store holds, to check a copy between backends.

`content_digest(store)` is the sha256 of a canonical listing: MEMORY.md, then
each person in key order, with the entries and their writers and evidence, the whole
history (oldest first), the archive and the records, as JSON with sorted keys.
It reads only through the store's public methods, so a `FileMemoryStore` and a
`PgMemoryStore` holding the same memory give the same digest. A person who
holds nothing is left out (an emptied folder on files has no rows on PostgreSQL).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, Protocol

from memory_core.file_memory.ledger import ArchivedEntry, EntryOrigin, LedgerChange
from memory_core.file_memory.origin import evidence_json

_Target = Literal["memory", "user"]  # store.Target, restated: store.py imports this module


class Readable(Protocol):
    """The reading half of `MemoryBackend`, all the digest needs."""

    def user_keys(self) -> list[str]: ...

    def history(
        self, target: _Target, user_key: str | None = None, limit: int | None = 20
    ) -> tuple[LedgerChange, ...]: ...

    def origins(self, target: _Target, user_key: str | None = None) -> list[EntryOrigin]: ...

    def archived(self, user_key: str) -> list[ArchivedEntry]: ...

    def record_names(self, user_key: str) -> list[str]: ...

    def peek_record(self, user_key: str, name: str) -> str | None: ...


def content_digest(store: Readable) -> str:
    """The sha256 (hex) of the canonical listing of everything `store` holds."""
    digest = hashlib.sha256()
    for item in canonical_listing(store):
        digest.update(json.dumps(item, ensure_ascii=False, sort_keys=True).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def canonical_listing(store: Readable) -> list[dict[str, Any]]:
    """MEMORY.md, then each person holding anything, as plain JSON values."""
    listing = [{"target": "memory", **_held(store, "memory", None)}]
    for key in sorted(store.user_keys()):
        held = _held(store, "user", key)
        if any(held.values()):
            listing.append({"target": "user", "user_key": key, **held})
    return listing


def _held(store: Readable, target: _Target, user_key: str | None) -> dict[str, Any]:
    history = reversed(store.history(target, user_key, None))  # oldest first
    held: dict[str, Any] = {
        "entries": [
            [o.text, o.origin.as_json(), o.at, evidence_json(o.evidence)]
            for o in store.origins(target, user_key)
        ],
        "history": [c.as_json() for c in history],
    }
    if user_key is not None:
        held["archive"] = [a.as_json() for a in store.archived(user_key)]
        held["records"] = {n: store.peek_record(user_key, n) for n in store.record_names(user_key)}
    return held

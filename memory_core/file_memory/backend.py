"""What the rest of Mnemo needs of a memory store, whichever backend holds it.

`FileMemoryStore` (files under the data directory) and
`memory_core.pg.memory.PgMemoryStore` (PostgreSQL) both satisfy `MemoryBackend`,
with the same semantics: code that takes a `MemoryBackend` (the memory tool,
staged changes, person settings, erasure) works on either.

`content_digest(store)` is the sha256 of a canonical listing of everything a
store holds (MEMORY.md, then each person in key order: entries with their
writers, the whole history, the archive and the records), computed through
this interface, so two stores hold the same memory exactly when their digests
agree; a person who holds nothing is left out (an empty folder on files has
no rows on PostgreSQL).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from memory_core.fence import ErasureFence
    from memory_core.file_memory.edits import Operation
    from memory_core.file_memory.ledger import ArchivedEntry, EntryOrigin, LedgerChange
    from memory_core.file_memory.origin import Origin
    from memory_core.file_memory.records import PersonRecord
    from memory_core.file_memory.render import MemorySnapshot
    from memory_core.file_memory.store import MemoryState, Target, UndoResult, WriteResult


class MemoryBackend(Protocol):
    """MEMORY.md, every person's USER.md with its ledger, and their records."""

    fence: ErasureFence

    def limit(self, target: Target) -> int: ...

    def read(self, target: Target, user_key: str | None = None) -> MemoryState: ...

    def apply(
        self,
        target: Target,
        user_key: str | None,
        operations: Sequence[Operation],
        origin: Origin = ...,
    ) -> WriteResult: ...

    def undo(
        self,
        target: Target,
        user_key: str | None,
        change_id: int | None = None,
        origin: Origin = ...,
    ) -> UndoResult: ...

    def history(
        self, target: Target, user_key: str | None = None, limit: int | None = 20
    ) -> tuple[LedgerChange, ...]: ...

    def origins(self, target: Target, user_key: str | None = None) -> list[EntryOrigin]: ...

    def archived(self, user_key: str) -> list[ArchivedEntry]: ...

    def snapshot(self, user_key: str | None, include_profile: bool) -> MemorySnapshot: ...

    def erase_user(self, user_key: str) -> bool: ...

    def user_keys(self) -> list[str]:
        """The people the store holds anything about, sorted."""
        ...

    def person_record(
        self, user_key: str, name: str
    ) -> contextlib.AbstractContextManager[PersonRecord]:
        """The person's record `name`, under their write lock (see `records`)."""
        ...

    def peek_record(self, user_key: str, name: str) -> str | None:
        """The person's record `name` as last written, without a lock."""
        ...

    def record_names(self, user_key: str) -> list[str]:
        """The names of the person's records, sorted."""
        ...

    def content_digest(self) -> str: ...


def content_digest(store: MemoryBackend) -> str:
    """The sha256 (hex) of the canonical listing of everything `store` holds."""
    digest = hashlib.sha256()
    for item in canonical_listing(store):
        digest.update(json.dumps(item, ensure_ascii=False, sort_keys=True).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def canonical_listing(store: MemoryBackend) -> list[dict[str, Any]]:
    """MEMORY.md, then each person holding anything, as plain JSON values."""
    listing = [{"target": "memory", **_held(store, "memory", None)}]
    for key in sorted(store.user_keys()):
        held = _held(store, "user", key)
        if any(held.values()):
            listing.append({"target": "user", "user_key": key, **held})
    return listing


def _held(store: MemoryBackend, target: Target, user_key: str | None) -> dict[str, Any]:
    history = reversed(store.history(target, user_key, None))  # oldest first
    held: dict[str, Any] = {
        "entries": [[o.text, o.origin.as_json(), o.at] for o in store.origins(target, user_key)],
        "history": [c.as_json() for c in history],
    }
    if user_key is not None:
        held["archive"] = [a.as_json() for a in store.archived(user_key)]
        held["records"] = {n: store.peek_record(user_key, n) for n in store.record_names(user_key)}
    return held

"""What the rest of Mnemo needs of a memory store, whichever backend holds it.

`FileMemoryStore` (files under the data directory) and
`memory_core.pg.memory.PgMemoryStore` (PostgreSQL) both satisfy `MemoryBackend`,
with the same semantics: code that takes a `MemoryBackend` (the memory tool,
staged changes, person settings, erasure) works on either.

`content_digest()` (see `memory_core.file_memory.digest`) tells whether two
stores, of either backend, hold exactly the same memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Protocol

from memory_core.fence import ErasureFence
from memory_core.file_memory.edits import Operation
from memory_core.file_memory.forgetting import ForgetResult
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

    def forget(self, user_key: str, texts: Sequence[str], origin: Origin = ...) -> ForgetResult:
        """Remove each of `texts` (a live or archived entry of `user_key`'s) for good, with
        every copy of its text (see `memory_core.file_memory.forgetting`)."""
        ...

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

"""One open transaction seen as a whole `PgSyncDatabase`: a move committed whole or not at all.

A move copies several stores (sessions, memory, skills, documents), each written
by its own store class through a `PgSyncDatabase`. Handed a `PgOneTransaction`
instead of a pool, every store writes into, and reads back from, the same single
transaction of one connection: each store's own transaction becomes a savepoint
in it, and its reads see what the move has written so far while nobody else sees
any of it. The caller commits once after the copy is verified; a failure, a
difference or a killed process leaves the target exactly as it was.

`HeldText` maps what a source holds to text PostgreSQL can hold, exactly as the
store's live writes do (`session_writes.clean`: a NUL becomes U+FFFD), and
counts what it changed; `HeldMemory` reads a memory source through it, so the
copy and the source's digest both see the mapped text.

`after_copy` builds the search indexes again once the rows are in, within the
move's transaction (`session_import.AFTER_BULK_LOAD`): filled row by row by the
copy, they would stay larger than one pass makes them, and the planner would
know nothing of the rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from memory_core.errors import PostgresError
from memory_core.file_memory.digest import Readable, content_digest
from memory_core.pg.blocking import PgSyncDatabase, SyncConnection
from memory_core.pg.database import Isolation
from memory_core.pg.migrations import PgMigration
from memory_core.pg.session_import import AFTER_BULK_LOAD
from memory_core.pg.session_writes import clean

__all__ = ["HeldMemory", "HeldText", "PgOneTransaction", "after_copy"]

T = TypeVar("T")


class PgOneTransaction(PgSyncDatabase):
    """`conn`, already inside a transaction, as a database of one connection.

    No pool is made (the parent's constructor is not run): `connection` is
    `conn` itself, `transaction` and `transact` a savepoint on it. An isolation
    level is not set (a savepoint cannot change it): the whole move reads its
    own writes, and the target is empty of anyone else's.
    """

    def __init__(self, conn: SyncConnection) -> None:
        self._conn = conn

    def open(self) -> None:
        """Nothing to open: the connection is the caller's."""

    def close(self) -> None:
        """Nothing to close: the caller commits or rolls back and closes."""

    @contextmanager
    def connection(self) -> Iterator[SyncConnection]:
        yield self._conn

    @contextmanager
    def transaction(self, isolation: Isolation | None = None) -> Iterator[SyncConnection]:
        with self._conn.transaction():
            yield self._conn

    def transact(
        self,
        work: Callable[[SyncConnection], T],
        *,
        isolation: Isolation | None = None,
        attempts: int | None = None,
    ) -> T:
        with self.transaction() as conn:
            return work(conn)

    def migrate(self, steps: Sequence[PgMigration]) -> dict[str, int]:
        raise PostgresError("the schema is created before a move's transaction, not in it")


def after_copy(conn: SyncConnection) -> None:
    """The search indexes rebuilt and the statistics taken, in `conn`'s transaction."""
    for statement in AFTER_BULK_LOAD:
        conn.execute(statement)


class HeldText:
    """Text as PostgreSQL holds it, mapped as its live writes map it (`clean`: U+FFFD for
    a NUL or a lone surrogate), through the plain values and frozen dataclasses a store
    reads out; `changed` counts the texts that were."""

    def __init__(self) -> None:
        self.changed = 0

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            held = clean(value)
            self.changed += held != value
            return held
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
            return type(value)(*(self(v) for v in value))
        if isinstance(value, tuple | list):
            return type(value)(self(v) for v in value)
        if isinstance(value, dict):
            return {self(k): self(v) for k, v in value.items()}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = dataclasses.fields(value)
            return dataclasses.replace(
                value, **{f.name: self(getattr(value, f.name)) for f in fields if f.init}
            )
        return value

    def row(self, row: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(self(v) if isinstance(v, str) else v for v in row)


class HeldMemory:
    """A memory source read as PostgreSQL can hold it: every text it gives through
    `HeldText` (user keys and record names are checked names: they are kept)."""

    def __init__(self, files: Readable, mapping: HeldText) -> None:
        self._files = files
        self._map = mapping

    def user_keys(self) -> list[str]:
        return self._files.user_keys()

    def history(self, target: Any, user_key: str | None = None, limit: int | None = 20) -> Any:
        return self._map(self._files.history(target, user_key, limit))

    def origins(self, target: Any, user_key: str | None = None) -> Any:
        return self._map(self._files.origins(target, user_key))

    def archived(self, user_key: str) -> Any:
        return self._map(self._files.archived(user_key))

    def record_names(self, user_key: str) -> list[str]:
        return self._files.record_names(user_key)

    def peek_record(self, user_key: str, name: str) -> str | None:
        text = self._files.peek_record(user_key, name)
        return None if text is None else str(self._map(text))

    def content_digest(self) -> str:
        return content_digest(self)

"""The synchronous twin of `PgDatabase`, for the stores whose interface is blocking.

    db = PgSyncDatabase("postgresql://…")
    db.open()
    db.migrate(STEPS)
    with db.connection() as conn:            # reads: an autocommit connection
        rows = conn.execute("SELECT …").fetchall()
    with db.transaction() as conn:           # one transaction, one attempt
        conn.execute("UPDATE …")
    value = db.transact(work)                # `work(conn)` in one transaction,
                                             # run again on a conflict
    db.close()

Memory, staged changes, person settings and skills are called from worker
threads and from synchronous code, so their PostgreSQL stores use this pool
(psycopg's `ConnectionPool`, safe to share between threads). Everything
behaves as `PgDatabase` does: autocommit connections, a conflict raised as
`PostgresConflictError`, `transact` retried with the same attempts and the
same jittered, doubling pauses (`memory_core.pg.database.pauses`), the same
migrations under the same advisory lock, and the same handling of a server
that goes away: `PostgresUnavailableError`, the pool checked, a write tried
again for up to its budget.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from psycopg import Connection, errors
from psycopg_pool import ConnectionPool, PoolTimeout

from memory_core.errors import PostgresConflictError, PostgresUnavailableError
from memory_core.pg.database import (
    CONFLICTS,
    DEFAULT_ATTEMPTS,
    ISOLATION_SQL,
    WRITE_BUDGET,
    Isolation,
    Retries,
    pool_options,
    unavailable,
    unavailable_error,
)
from memory_core.pg.migrations import PgMigration, apply_migrations

T = TypeVar("T")
SyncConnection = Connection[Any]


class PgSyncDatabase:
    """A thread-safe pool of blocking connections to one PostgreSQL database."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        attempts: int = DEFAULT_ATTEMPTS,
        connect_timeout: float = 30.0,
        write_budget: float = WRITE_BUDGET,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self._attempts = attempts
        self._timeout = connect_timeout
        self._budget = write_budget
        self._checking = threading.Lock()
        self._pool: ConnectionPool[SyncConnection] = ConnectionPool(
            url, **pool_options(min_size, max_size, connect_timeout)
        )

    def open(self) -> None:
        """Open the pool and wait for its first connections."""
        try:
            self._pool.open(wait=True, timeout=self._timeout)
        except PoolTimeout as err:
            self._pool.close()
            raise PostgresUnavailableError(f"no connection to PostgreSQL: {err}") from err

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> PgSyncDatabase:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def connection(self) -> Iterator[SyncConnection]:
        """A pooled autocommit connection (each statement its own transaction)."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as err:
            raise PostgresUnavailableError(f"no free PostgreSQL connection: {err}") from err
        except errors.Error as err:
            if not unavailable(err):
                raise
            self._check_pool()
            raise unavailable_error(err) from err

    def _check_pool(self) -> None:
        """Test the idle connections (one check at a time; a caller finding one under
        way goes on): the ones the server closed are replaced."""
        if self._checking.acquire(blocking=False):
            try:
                with contextlib.suppress(Exception):  # the pool reconnects on its own
                    self._pool.check()
            finally:
                self._checking.release()

    @contextmanager
    def transaction(self, isolation: Isolation | None = None) -> Iterator[SyncConnection]:
        """One transaction on a pooled connection: committed when the block ends,
        rolled back when it raises. A conflict raises `PostgresConflictError`."""
        with self.connection() as conn:
            try:
                with conn.transaction():
                    if isolation is not None:
                        conn.execute(ISOLATION_SQL[isolation])
                    yield conn
            except CONFLICTS as err:
                raise PostgresConflictError(f"transaction conflicted: {err}") from err

    def transact(
        self,
        work: Callable[[SyncConnection], T],
        *,
        isolation: Isolation | None = None,
        attempts: int | None = None,
    ) -> T:
        """`work(conn)` in one transaction, run again (in a new one) on a conflict, and
        while the server is unavailable for up to the write budget."""
        retries = Retries(self._attempts if attempts is None else attempts, self._budget)
        while True:
            try:
                with self.transaction(isolation) as conn:
                    return work(conn)
            except (PostgresConflictError, PostgresUnavailableError) as err:
                wait = retries.pause(err)
            time.sleep(wait)

    def migrate(self, steps: Sequence[PgMigration]) -> dict[str, int]:
        """Bring each component of `steps` to its newest version; {component: version}.

        See `memory_core.pg.migrations`: one step per transaction, under an
        advisory lock, a database whose record disagrees with the code refused.
        """
        with self.connection() as conn:
            return apply_migrations(conn, steps)

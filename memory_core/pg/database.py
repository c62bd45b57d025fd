"""A pool of PostgreSQL connections, transactions retried on conflict, migrations.

    db = PgDatabase("postgresql://…")
    await db.open()
    await db.migrate(STEPS)                  # this store's `PgMigration`s
    async with db.connection() as conn:      # reads: an autocommit connection
        rows = await (await conn.execute("SELECT …")).fetchall()
    async with db.transaction() as conn:     # one transaction, one attempt
        await conn.execute("UPDATE …")
    value = await db.transact(work)          # `work(conn)` in one transaction,
                                             # run again on a conflict
    await db.close()

Pooled connections are in autocommit mode; `transaction()` wraps its block in
BEGIN … COMMIT (ROLLBACK when the block raises). A serialization failure or a
deadlock, which PostgreSQL reports when concurrent transactions cannot all
commit, comes out of `transaction()` as `PostgresConflictError` (the caller
never sees a psycopg class). A block cannot be re-run by its context manager,
so the retry lives in `transact(work)`: it runs the coroutine function `work`
in a fresh transaction up to `attempts` times, sleeping a jittered, doubling
pause between attempts, and raises `PostgresConflictError` when every attempt
conflicted. `work` must therefore be safe to run again: everything it does
to the database is rolled back with a failed attempt, and it should do
nothing outside it.

A server that goes away (a restart, an outage, a disk that is full or a
database made read-only) is told apart from a conflict: `unavailable(err)`.
Such an error inside any block of `connection()` or `transaction()` comes out
as `PostgresUnavailableError`, and the pool checks its idle connections at
once (`AsyncConnectionPool.check`): those the server closed are replaced, so
the next block does not get a dead one. `transact` runs `work` again after
such an error too, with the same doubling pauses, for at most
`WRITE_BUDGET` seconds (`read(work)` does the same for a read): a restart of
half a second loses no write, and an
outage longer than the budget fails the write, which the caller reports (the
message is then not confirmed to its platform, which sends it again). A pool
that has no connection to give within `CHECKOUT_TIMEOUT` seconds is an
outage as well, never a 30 s hang of every caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

from psycopg import AsyncConnection, errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from memory_core.errors import PostgresConflictError, PostgresUnavailableError
from memory_core.pg.migrations import PgMigration, migrate_url

T = TypeVar("T")
Isolation = Literal["read committed", "repeatable read", "serializable"]
Connection = AsyncConnection[Any]

ISOLATION_SQL: dict[str, bytes] = {
    "read committed": b"SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "repeatable read": b"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    "serializable": b"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
}
CONFLICTS = (errors.SerializationFailure, errors.DeadlockDetected)

DEFAULT_ATTEMPTS = 8
FIRST_PAUSE = 0.005  # seconds before the second attempt; doubles each time, jittered
MAX_PAUSE = 0.5
WRITE_BUDGET = 15.0  # seconds a write is tried again while the server is unavailable
CHECKOUT_TIMEOUT = 5.0  # seconds to wait for a pooled connection before it counts as an outage
OUTAGE_PAUSE = 1.0  # the longest pause between two tries while the server is unavailable


def pauses(attempts: int) -> Iterator[float]:
    """The pause before each attempt after the first (`attempts - 1` of them):
    jittered, doubling from `FIRST_PAUSE` up to `MAX_PAUSE`."""
    pause = FIRST_PAUSE
    for _ in range(attempts - 1):
        yield random.uniform(0, pause)
        pause = min(pause * 2, MAX_PAUSE)


def pool_options(min_size: int, max_size: int, connect_timeout: float) -> dict[str, Any]:
    """The options both pools share: autocommit connections, opened by `open()`, a
    connection handed out within `CHECKOUT_TIMEOUT` (at most `connect_timeout`)."""
    return {
        "min_size": min_size,
        "max_size": max_size,
        "kwargs": {"autocommit": True, "connect_timeout": max(1, round(connect_timeout))},
        "open": False,
        "timeout": min(connect_timeout, CHECKOUT_TIMEOUT),
    }


def unavailable(err: BaseException) -> bool:
    """Whether `err` says the server is gone or refuses writes for now (a broken
    connection, a shutdown, a full disk, a read-only database), not that a statement
    was wrong, cancelled by its own time limit, found a lock taken or lost to a concurrent
    transaction (a serialization failure or a deadlock: `CONFLICTS`, tried again as such)."""
    if isinstance(err, errors.ReadOnlySqlTransaction):
        return True
    if isinstance(err, errors.Error) and (err.sqlstate or "").startswith("40"):
        return False  # class 40, transaction rollback: a conflict
    return isinstance(err, errors.OperationalError) and not isinstance(
        err, errors.QueryCanceled | errors.LockNotAvailable
    )


def unavailable_error(err: BaseException) -> PostgresUnavailableError:
    """`err` (`unavailable`) as the error callers see, its first line kept."""
    text = str(err).strip().splitlines()
    return PostgresUnavailableError(
        f"PostgreSQL is unavailable: {text[0] if text else type(err).__name__}"
    )


class Retries:
    """When one piece of work is tried again: after a conflict, the next of `attempts`
    jittered, doubling pauses (`pauses`); while the server is unavailable, the pauses of
    `budget` seconds (`outage_pauses`). `transact` and `read`, async and blocking, share it."""

    def __init__(self, attempts: int, budget: float) -> None:
        self._attempts, self._budget = attempts, budget
        self._conflicts = pauses(attempts)
        self._outage: Iterator[float] | None = None

    def pause(self, err: PostgresConflictError | PostgresUnavailableError) -> float:
        """The seconds to wait before the next try after `err`; raises (the error, or
        `exhausted` for conflicts) when no try is left."""
        if isinstance(err, PostgresConflictError):
            wait = next(self._conflicts, None)
            if wait is None:
                raise exhausted(self._attempts, err) from err
            return wait
        self._outage = self._outage or outage_pauses(self._budget, time.monotonic)
        wait = next(self._outage, None)
        if wait is None:
            raise err
        return wait


def outage_pauses(budget: float, clock: Callable[[], float]) -> Iterator[float]:
    """Pauses between tries of a write while the server is unavailable: doubling from
    `FIRST_PAUSE` up to `OUTAGE_PAUSE`, jittered, until `budget` seconds have passed."""
    ends = clock() + budget
    pause = FIRST_PAUSE
    while clock() < ends:
        yield min(random.uniform(pause / 2, pause), max(0.0, ends - clock()))
        pause = min(pause * 2, OUTAGE_PAUSE)


def exhausted(attempts: int, err: PostgresConflictError) -> PostgresConflictError:
    """The error of a `transact` whose every attempt conflicted."""
    return PostgresConflictError(f"transaction conflicted on all {attempts} attempts: {err}")


class PgDatabase:
    """A pool of connections to one PostgreSQL database."""

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
        self._url = url
        self._attempts = attempts
        self._timeout = connect_timeout
        self._budget = write_budget
        self._checking: asyncio.Task[None] | None = None
        self._pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            url, **pool_options(min_size, max_size, connect_timeout)
        )

    async def open(self) -> None:
        """Open the pool and wait for its first connections."""
        try:
            await self._pool.open(wait=True, timeout=self._timeout)
        except PoolTimeout as err:
            await self._pool.close()
            raise PostgresUnavailableError(f"no connection to PostgreSQL: {err}") from err

    async def close(self) -> None:
        checking, self._checking = self._checking, None
        if checking is not None:
            checking.cancel()
            await asyncio.gather(checking, return_exceptions=True)
        await self._pool.close()

    async def __aenter__(self) -> PgDatabase:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """A pooled autocommit connection (each statement its own transaction)."""
        try:
            async with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as err:
            raise PostgresUnavailableError(f"no free PostgreSQL connection: {err}") from err
        except errors.Error as err:
            if not unavailable(err):
                raise
            self._check_pool()
            raise unavailable_error(err) from err

    def _check_pool(self) -> None:
        """Test the idle connections in the background (one check at a time): the ones
        the server closed are replaced before they are handed out."""
        if self._checking is None or self._checking.done():
            self._checking = asyncio.ensure_future(self._check())

    async def _check(self) -> None:
        with contextlib.suppress(Exception):  # the pool reconnects on its own
            await self._pool.check()

    @asynccontextmanager
    async def transaction(self, isolation: Isolation | None = None) -> AsyncIterator[Connection]:
        """One transaction on a pooled connection: committed when the block ends,
        rolled back when it raises. A conflict raises `PostgresConflictError`."""
        async with self.connection() as conn:
            try:
                async with conn.transaction():
                    if isolation is not None:
                        await conn.execute(ISOLATION_SQL[isolation])
                    yield conn
            except CONFLICTS as err:
                raise PostgresConflictError(f"transaction conflicted: {err}") from err

    async def read(self, work: Callable[[Connection], Awaitable[T]]) -> T:
        """`await work(conn)` on a pooled connection, run again on a fresh one while the
        server is unavailable, for up to the write budget (a read can always run again)."""
        retries = Retries(1, self._budget)
        while True:
            try:
                async with self.connection() as conn:
                    return await work(conn)
            except PostgresUnavailableError as err:
                wait = retries.pause(err)
            await asyncio.sleep(wait)

    async def transact(
        self,
        work: Callable[[Connection], Awaitable[T]],
        *,
        isolation: Isolation | None = None,
        attempts: int | None = None,
    ) -> T:
        """`await work(conn)` in one transaction, run again (in a new one) on a conflict,
        and while the server is unavailable for up to the write budget."""
        retries = Retries(self._attempts if attempts is None else attempts, self._budget)
        while True:
            try:
                async with self.transaction(isolation) as conn:
                    return await work(conn)
            except (PostgresConflictError, PostgresUnavailableError) as err:
                wait = retries.pause(err)
            await asyncio.sleep(wait)

    async def migrate(self, steps: Sequence[PgMigration]) -> dict[str, int]:
        """Bring each component of `steps` to its newest version; {component: version}.

        See `memory_core.pg.migrations`: one step per transaction, under an
        advisory lock, a database whose record disagrees with the code refused.
        The steps run in a worker thread on a synchronous connection of their own.
        """
        return await asyncio.to_thread(migrate_url, self._url, steps, self._timeout)

"""Session locks across replicas: PostgreSQL session-level advisory locks.

`PgSessionLocks` keeps ONE connection of its own, outside the pools, on which it
takes `pg_try_advisory_lock` for each session a turn of this replica holds (a
connection may hold any number of advisory locks). Nothing waits on the server:
`hold` tries again after a short, doubling pause until the key is free, so a
replica waiting for many sessions still uses one connection. When the replica
dies its connection closes and the server releases every lock it held: that is
what lets another replica take its sessions over.

Advisory locks are database-wide, so a key's number is a 64-bit BLAKE2b hash of
the schema (`current_schema()`) and the routing key: two bots in two schemas of
one database never share a lock. A lock is reentrant on its connection, so a
local lock per key comes first: one task of this replica per key reaches the
server. A lock request cut by a cancellation is finished in the background and
its lock released, so no key stays locked by a task that went away.

When the connection breaks (a server restart, `pg_terminate_backend`, a network
that froze), the locks held on it are gone, and another replica may take their
keys. So while any lock is held a watch asks the connection every
`CHECK_EVERY` seconds (``SELECT 1``, answered within `CHECK_TIMEOUT`), and
any request that finds it broken says so too. The held keys are then taken
again on a new connection, for up to `RECLAIM_WITHIN` seconds: after a
restart of a moment every replica has its sessions back and no turn stops.
The keys another replica took meanwhile, or all of them when the server does
not answer in time, go to the `on_lost` callbacks (the gateway stops their
turns, which keep nothing), and `held(key)` is False for them.
A replica that takes a key and finds a turn's message unanswered waits
`LOST_WITHIN` (at least `CHECK_EVERY + CHECK_TIMEOUT + RECLAIM_WITHIN`)
before answering it
(`gateway.replicas`), so a turn whose lock was lost has stopped before anyone
else begins it, unless its replica is frozen altogether.

`/stop` across replicas: a turn running on another replica holds its key's lock,
so when `try_hold` fails `stop_elsewhere` sends `NOTIFY` on the schema's stop
channel with the key as payload (never any text of the chat). Every replica
LISTENs on a second connection of its own and hands each key it hears to the
`on_stop` callbacks, which cancel the local turn of that key if there is one. A
dropped listening connection is reconnected after a doubling pause (capped),
logged once per outage; a stop sent meanwhile is lost, as the turn's reply is
then too.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
from psycopg import sql

from memory_core.errors import PostgresUnavailableError
from memory_core.sessions.locks import LOST_WITHIN, KeyLocks

log = logging.getLogger(__name__)

FIRST_PAUSE = 0.02  # seconds before asking again for a busy key; doubles
MAX_PAUSE = 0.25
WAIT_FOR_SERVER = 15.0  # seconds `hold` waits out a server it cannot reach (a restart)
FIRST_RETRY = 0.1  # seconds before listening again after the connection dropped; doubles
MAX_RETRY = 5.0
CHECK_EVERY = 0.5  # seconds between two checks of the lock connection while locks are held
CHECK_TIMEOUT = 2.0  # seconds the check may take before the connection counts as lost
RECLAIM_WITHIN = 2.0  # seconds a lost key is tried again on a new connection
assert CHECK_EVERY + CHECK_TIMEOUT + RECLAIM_WITHIN <= LOST_WITHIN  # stopped within it


def lock_number(namespace: str, key: str) -> int:
    """The signed 64-bit advisory lock number of `key` in `namespace`."""
    digest = hashlib.blake2b(f"{namespace}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def stop_channel(namespace: str) -> str:
    """The channel `/stop` requests of `namespace` (the schema) are sent on."""
    return "mnemo_stop_" + hashlib.blake2b(namespace.encode(), digest_size=8).hexdigest()


class PgSessionLocks:
    """One turn at a time per session key across every replica on one database."""

    shared = True

    def __init__(self, url: str, connect_timeout: float = 10.0) -> None:
        self._url = url
        self._timeout = connect_timeout
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._namespace = ""
        self._keys = KeyLocks()
        self._pending: set[asyncio.Task[None]] = set()
        self._connecting = asyncio.Lock()
        self._callbacks: list[Callable[[str], None]] = []
        self._listener: asyncio.Task[None] | None = None
        self._listening: psycopg.AsyncConnection[Any] | None = None
        self._held: dict[str, int] = {}  # key -> lock number, held on the current connection
        self._wanted: dict[str, int] = {}  # key -> lock number, of every block in progress
        self._reclaiming: set[str] = set()  # lost keys being taken again
        self._lost_callbacks: list[Callable[[list[str]], None]] = []
        self._watch: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Connect the lock connection (and learn the schema that names the keys), and
        listen for `/stop` requests of the other replicas."""
        await self._connection()
        conn = await self._listen()
        self._listener = asyncio.create_task(self._hear(conn))
        self._watch = asyncio.create_task(self._watch_held())

    async def close(self) -> None:
        """Stop listening; close the connection: every lock it still holds is released."""
        for task in (self._listener, self._watch):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._listener = self._watch = None
        listening, self._listening = self._listening, None
        if listening is not None:
            await listening.close()
        await asyncio.gather(*self._pending, return_exceptions=True)
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        async with self._keys.hold(key):
            number = lock_number(self._namespace, key)
            pause, ends = FIRST_PAUSE, time.monotonic() + WAIT_FOR_SERVER
            while not await self._acquire_or_wait(number, ends):
                await asyncio.sleep(pause)
                pause = min(pause * 2, MAX_PAUSE)
            self._held[key] = self._wanted[key] = number
            try:
                yield
            finally:
                del self._wanted[key]
                if self._held.pop(key, None) is not None:  # not lost meanwhile
                    await self._release_shielded(number)

    @contextlib.asynccontextmanager
    async def try_hold(self, key: str) -> AsyncIterator[bool]:
        if key in self._keys:  # this replica holds it or waits for it
            yield False
            return
        async with self._keys.hold(key):
            number = await self._number(key)
            got = await self._acquire(number)
            if got:
                self._held[key] = self._wanted[key] = number
            try:
                yield got
            finally:
                if got:
                    del self._wanted[key]
                if got and self._held.pop(key, None) is not None:  # not lost meanwhile
                    await self._release_shielded(number)

    async def stop_elsewhere(self, key: str) -> bool:
        # busy here (a local turn would have been stopped before asking) or held elsewhere
        async with self.try_hold(key) as free:
            if free:
                return False  # nobody's turn holds it
        sent = sql.SQL("SELECT pg_notify(%s, %s)")
        conn = await self._connection()
        try:
            await conn.execute(sent, (stop_channel(self._namespace), key))
        except psycopg.OperationalError as err:
            self._lost(err)
            conn = await self._connection()
            await conn.execute(sent, (stop_channel(self._namespace), key))
        return True

    def on_stop(self, callback: Callable[[str], None]) -> None:
        self._callbacks.append(callback)

    def on_lost(self, callback: Callable[[list[str]], None]) -> None:
        self._lost_callbacks.append(callback)

    def held(self, key: str) -> bool:
        return key in self._held or key in self._reclaiming

    def _lost(self, reason: BaseException | str) -> None:
        """The lock connection broke: every lock held on it is gone. Drop the connection
        and take the held keys again on a new one (`_reclaim`)."""
        keys = dict(self._held)
        self._held.clear()
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            self._later(_close_quietly(conn))
        text = str(reason).strip().splitlines()
        log.warning(
            "the session lock connection broke (%s); taking %d held sessions' locks again",
            text[0] if text else type(reason).__name__,
            len(keys),
        )
        if keys:
            self._reclaiming.update(keys)
            self._later(self._reclaim(keys))

    async def _reclaim(self, keys: dict[str, int]) -> None:
        """Take `keys` again within `RECLAIM_WITHIN` seconds (a server restart of a moment
        costs no turn); the ones another replica took meanwhile, or all when the server
        does not answer in time, go to the `on_lost` callbacks, whose turns stop."""
        left, gone = dict(keys), set[str]()
        ends = time.monotonic() + RECLAIM_WITHIN
        while left and (remaining := ends - time.monotonic()) > 0:
            try:
                conn = await asyncio.wait_for(self._connection(), remaining)
                for key, number in list(left.items()):
                    if self._wanted.get(key) == number:  # else its block ended: not wanted
                        if not await asyncio.wait_for(self._try_on(conn, number), remaining):
                            gone.add(key)  # another replica holds it now
                        elif self._wanted.get(key) == number:
                            self._held[key] = number  # still its block's: nothing lost
                        else:
                            await self._release(number)
                    del left[key]
            except (TimeoutError, psycopg.Error, PostgresUnavailableError):
                await asyncio.sleep(min(FIRST_RETRY, max(0.0, ends - time.monotonic())))
        self._reclaiming.difference_update(keys)
        lost = [k for k in gone | set(left) if self._wanted.get(k) == keys[k]]
        if not lost:
            log.info("took the %d sessions' locks again", len(keys))
            return
        log.warning("%d sessions' locks are lost; their turns here stop", len(lost))
        for callback in self._lost_callbacks:
            try:
                callback(lost)
            except Exception:
                log.exception("a lost lock's callback failed")

    async def _watch_held(self) -> None:
        """While locks are held, check their connection; a broken or silent one is lost."""
        while True:
            await asyncio.sleep(CHECK_EVERY)
            conn = self._conn
            if not self._held or conn is None:
                continue
            try:
                await asyncio.wait_for(conn.execute("SELECT 1"), CHECK_TIMEOUT)
            except (psycopg.Error, TimeoutError) as err:
                if self._conn is conn:  # not already replaced by a request that saw it
                    self._lost(err if str(err) else "no answer to a check")

    async def _listen(self) -> psycopg.AsyncConnection[Any]:
        conn = await self._connect()
        try:
            await conn.execute(
                sql.SQL("LISTEN {}").format(sql.Identifier(stop_channel(self._namespace)))
            )
        except BaseException:
            await conn.close()
            raise
        self._listening = conn
        return conn

    async def _hear(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Hand every key heard to the callbacks; listen again when the connection drops."""
        while True:
            try:
                async for note in conn.notifies():
                    self._heard(note.payload)
                reason = "closed"
            except psycopg.OperationalError as err:
                reason = str(err).strip() or type(err).__name__
            log.warning("the /stop listening connection dropped (%s); reconnecting", reason)
            with contextlib.suppress(Exception):
                await conn.close()
            conn = await self._listen_again()
            log.info("listening for /stop requests again")

    async def _listen_again(self) -> psycopg.AsyncConnection[Any]:
        pause = FIRST_RETRY
        while True:
            await asyncio.sleep(pause)
            try:
                return await self._listen()
            except (PostgresUnavailableError, psycopg.Error):
                pause = min(pause * 2, MAX_RETRY)

    def _heard(self, key: str) -> None:
        for callback in self._callbacks:
            try:
                callback(key)
            except Exception:
                log.exception("a /stop request of session %s failed", key)

    async def _number(self, key: str) -> int:
        await self._connection()
        return lock_number(self._namespace, key)

    async def _acquire_or_wait(self, number: int, ends: float) -> bool:
        """`_acquire`, False while the server cannot be reached before `ends` (then the
        `PostgresUnavailableError`): a restart of the server is waited out."""
        try:
            return await self._acquire(number)
        except PostgresUnavailableError:
            if time.monotonic() > ends:
                raise
            return False

    async def _acquire(self, number: int) -> bool:
        """Try the lock once; a cancellation here still releases what the server granted."""
        attempt = asyncio.ensure_future(self._try(number))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            self._later(self._release_if_granted(attempt, number))
            raise

    async def _release_if_granted(self, attempt: asyncio.Future[bool], number: int) -> None:
        with contextlib.suppress(Exception):
            if await attempt:
                await self._release(number)

    async def _release_shielded(self, number: int) -> None:
        release = asyncio.ensure_future(self._release(number))
        try:
            await asyncio.shield(release)
        except asyncio.CancelledError:
            self._later(release)
            raise

    def _later(self, work: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _try_on(self, conn: psycopg.AsyncConnection[Any], number: int) -> bool:
        row = await (await conn.execute("SELECT pg_try_advisory_lock(%s)", (number,))).fetchone()
        return bool(row is not None and row[0])

    async def _try(self, number: int) -> bool:
        try:
            return await self._try_on(await self._connection(), number)
        except psycopg.OperationalError as err:  # the connection broke: its locks are gone
            self._lost(err)
            return await self._try_on(await self._connection(), number)

    async def _release(self, number: int) -> None:
        conn = self._conn
        if conn is None or conn.closed:
            return  # closed: the server released it
        try:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (number,))
        except psycopg.OperationalError as err:  # broken: the server released it
            self._lost(err)

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        async with self._connecting:
            conn = self._conn
            if conn is not None and not conn.closed:
                return conn
            conn = await self._connect()
            self._conn = conn
            return conn

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, connect_timeout=max(1, round(self._timeout))
            )
        except psycopg.Error as err:
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise PostgresUnavailableError(f"cannot connect to PostgreSQL: {reason}") from None
        row = await (await conn.execute("SELECT current_schema()")).fetchone()
        self._namespace = str(row[0]) if row is not None and row[0] is not None else ""
        return conn


async def _close_quietly(conn: psycopg.AsyncConnection[Any]) -> None:
    with contextlib.suppress(Exception):
        await conn.close()

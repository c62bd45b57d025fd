"""The global limit on model calls in flight (`llm.max_concurrency`).

One `ModelCallLimiter` is built at start-up and shared by every `ModelClient`
(the replies' and the background work's), so the endpoint never sees more
than `limit` requests at once. Replies must not wait behind background work
(recaps, compression, review): a waiting foreground call always goes before a
waiting background one, and background calls never take the last
`reserved` slots, so a reply that arrives while background work is busy
finds a slot free. A slot is held for one request only, never while a caller
sleeps between retries.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator


class ModelCallLimiter:
    """At most `limit` calls in flight; foreground first, `reserved` slots foreground-only.

    `reserved` defaults to one slot when `limit` is above one (with a single
    slot, background work may use it, but a waiting reply still goes first).
    """

    def __init__(self, limit: int, reserved: int | None = None) -> None:
        if limit < 1:
            raise ValueError("the model call limit must be at least 1")
        if reserved is None:
            reserved = 1 if limit > 1 else 0
        if not 0 <= reserved < limit:
            raise ValueError("reserved slots must leave at least one for background work")
        self.limit = limit
        self.reserved = reserved
        self._in_flight = 0
        self._foreground: deque[asyncio.Future[None]] = deque()
        self._background: deque[asyncio.Future[None]] = deque()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> tuple[int, int]:
        """(foreground, background) callers waiting for a slot."""
        return len(self._foreground), len(self._background)

    @contextlib.asynccontextmanager
    async def slot(self, *, background: bool = False) -> AsyncIterator[None]:
        """Hold one slot for the body; wait (in priority order) until one is free."""
        await self._acquire(background)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, background: bool) -> None:
        queue = self._background if background else self._foreground
        if not queue and not (background and self._foreground) and self._free(background):
            self._in_flight += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # granted just as the caller gave up: pass the slot on
            else:
                with contextlib.suppress(ValueError):  # unless the grant loop dropped it
                    queue.remove(waiter)
            raise

    def _free(self, background: bool) -> bool:
        cap = self.limit - self.reserved if background else self.limit
        return self._in_flight < cap

    def _release(self) -> None:
        self._in_flight -= 1
        self._grant()

    def _grant(self) -> None:
        """Hand free slots to waiters: every foreground one first, then background ones."""
        for queue, background in ((self._foreground, False), (self._background, True)):
            while queue and self._free(background):
                waiter = queue.popleft()
                if waiter.done():  # cancelled while queued
                    continue
                self._in_flight += 1
                waiter.set_result(None)

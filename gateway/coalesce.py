"""Blocking work done off the event loop, once for everyone who asked at the same time.

`Coalesced` runs `work(items)` in a worker thread (`asyncio.to_thread`), one call at a
time: items submitted while a call runs wait together for the next one. Each caller
is answered by a call that started after it arrived, so what it is told is never
older than its request (a document read again, or a write that holds its item),
yet a thousand callers at once cost a handful of calls, not a thousand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Coalesced(Generic[T, R]):
    """`work` over the items submitted together, in a thread, one call at a time."""

    def __init__(self, work: Callable[[list[T]], R]) -> None:
        self._work = work
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._task: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        """The result of the first call of `work` that started after this and holds
        `item`; its exception, when it raised."""
        answer: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, answer))
        if self._task is None:
            self._task = asyncio.create_task(self._drain())
        return await answer

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    result = await asyncio.to_thread(self._work, [item for item, _ in batch])
                except Exception as exc:  # not swallowed: raised to each caller, who decides
                    for _, answer in batch:
                        if not answer.done():
                            answer.set_exception(exc)
                    continue
                for _, answer in batch:
                    if not answer.done():
                        answer.set_result(result)
        finally:
            self._task = None

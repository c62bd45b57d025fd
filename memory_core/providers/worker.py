"""`BackgroundWorker`: memory work off the reply path, in order per key.

The manager hands it provider writes (`sync_turn`, `on_session_end`) and
warm-ups (`queue_prefetch`), keyed by session, so a turn's reply never waits
for them and each session's jobs still run in the order they were queued. A
failing job is logged with its traceback and the next one runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Hashable

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]
_CANCEL_GRACE = 0.5  # seconds a cancelled job gets to unwind at drain


class BackgroundWorker:
    """Runs jobs off the reply path: first in, first out per key, keys side by side.

    One task per key with queued work (it ends when its queue is empty), so a
    slow session never holds up another. Share one worker between the
    managers of all sessions and `drain` it at shutdown.
    """

    def __init__(self) -> None:
        self._queues: dict[Hashable, deque[tuple[str, Job]]] = {}
        self._tasks: dict[Hashable, asyncio.Task[None]] = {}

    def submit(self, key: Hashable, label: str, job: Job) -> None:
        """Queue `job` behind the earlier jobs of `key` (needs a running event loop)."""
        self._queues.setdefault(key, deque()).append((label, job))
        if key not in self._tasks:
            task = asyncio.get_running_loop().create_task(self._run(key), name=f"memory:{key}")
            self._tasks[key] = task

    def pending(self, key: Hashable | None = None) -> int:
        """Jobs queued and not yet started (for `key`, or for all keys)."""
        if key is not None:
            return len(self._queues.get(key, ()))
        return sum(len(queue) for queue in self._queues.values())

    async def _run(self, key: Hashable) -> None:
        queue = self._queues[key]
        try:
            while queue:
                label, job = queue.popleft()
                try:
                    await job()
                except Exception:  # the top of a job: log it, run the next one
                    log.exception("memory background job %r failed", label)
        finally:
            del self._tasks[key]
            if queue:  # submitted while a drain was cancelling this task
                self._tasks[key] = asyncio.get_running_loop().create_task(self._run(key))
            else:
                del self._queues[key]

    async def drain(self, timeout: float, key: Hashable | None = None) -> int:
        """Wait up to `timeout` s for queued work (of `key`, or all); return the jobs dropped.

        Work still running at the deadline is cancelled and what is queued
        behind it is dropped, with a warning that says how much.
        """
        keys = [key] if key is not None else list(self._tasks)
        tasks = {k: self._tasks[k] for k in keys if k in self._tasks}
        if not tasks:
            return 0
        await asyncio.wait(tasks.values(), timeout=timeout)
        dropped = 0
        for k, task in tasks.items():
            if not task.done():
                dropped += 1 + len(self._queues.get(k, ()))
                self._queues.get(k, deque()).clear()
                task.cancel()
        if dropped:
            log.warning(
                "memory background work not finished in %.1f s: %d job(s) dropped", timeout, dropped
            )
            await asyncio.wait([t for t in tasks.values() if not t.done()], timeout=_CANCEL_GRACE)
        return dropped

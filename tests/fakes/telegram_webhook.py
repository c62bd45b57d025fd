"""The fake Telegram's webhook delivery: each update POSTed until a target answers 200.

Once the bot called ``setWebhook`` and a test named the targets (the replicas' own
listen addresses: in production a reverse proxy picks the replica), every injected
update is POSTed as JSON with the ``X-Telegram-Bot-Api-Secret-Token`` header to one
target in turn (round robin). An answer other than 200, a refused connection or no
answer within `timeout` is retried after `backoff` seconds on the NEXT target, until
one answers 200, as Telegram retries. One chat's updates are delivered in order: the
next waits until the one before was answered 200 (other chats do not wait). Every
attempt is kept (`attempts`: update id, target, HTTP status or None for no answer).
`again` sends an update once more, at once and beside its lane (Telegram retrying
after a slow answer, or two replicas given the same update).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


@dataclass(frozen=True)
class Attempt:
    """One POST of an update: where, and the HTTP status (None: no answer)."""

    update_id: int
    target: str
    status: int | None


class WebhookDelivery:
    """Posts updates to `targets`; `notify` is called after every attempt."""

    def __init__(self, notify: Callable[[], None], backoff: float, timeout: float) -> None:
        self.targets: list[str] = []
        self.attempts: list[Attempt] = []
        self._notify, self._backoff, self._timeout = notify, backoff, timeout
        self._turn = itertools.count()
        self._lanes: dict[object, asyncio.Task[None]] = {}  # chat -> its last delivery
        self._tasks: set[asyncio.Task[None]] = set()
        self._http: aiohttp.ClientSession | None = None
        self._closing = asyncio.Event()

    def answered(self, update_id: int) -> int:
        """How many attempts of the update were answered 200."""
        return sum(1 for a in self.attempts if a.update_id == update_id and a.status == 200)

    def deliver(self, update: dict[str, Any], secret: str) -> None:
        """Deliver `update` after the earlier updates of its chat."""
        lane = _chat_of(update)
        before = self._lanes.get(lane)
        task = self._spawn(self._post_until_answered(update, secret, before))
        self._lanes[lane] = task

    def again(self, update: dict[str, Any], secret: str, target: str | None = None) -> None:
        """Deliver `update` once more, now, first to `target` (None: the next in turn;
        retried like any delivery)."""
        first = None if target is None else self.targets.index(target)
        self._spawn(self._post_until_answered(update, secret, None, first))

    async def close(self) -> None:
        self._closing.set()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
            self._http = None

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _post_until_answered(
        self,
        update: dict[str, Any],
        secret: str,
        before: asyncio.Task[None] | None,
        first: int | None = None,
    ) -> None:
        if before is not None:
            await asyncio.wait([before])
        turn = next(self._turn) if first is None else first  # then the next after a failure
        while not self._closing.is_set():
            if self.targets:  # none (the test took them away): wait, as for a refusal
                target, turn = self.targets[turn % len(self.targets)], turn + 1
                status = await self._post(target, update, secret)
                self.attempts.append(Attempt(update["update_id"], target, status))
                self._notify()
                if status == 200:
                    return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), self._backoff)

    async def _post(self, target: str, update: dict[str, Any], secret: str) -> int | None:
        if self._http is None:
            self._http = aiohttp.ClientSession()
        try:
            async with self._http.post(
                target,
                json=update,
                headers={SECRET_HEADER: secret},
                timeout=aiohttp.ClientTimeout(total=self._timeout),
            ) as answer:
                await answer.read()
                return answer.status
        except (aiohttp.ClientError, TimeoutError):
            return None


def _chat_of(update: dict[str, Any]) -> object:
    """The chat whose updates go in order (an update of no chat: its own lane)."""
    for kind in ("message", "edited_message", "callback_query"):
        body = update.get(kind)
        if isinstance(body, dict):
            message = body.get("message", body) if kind == "callback_query" else body
            chat = message.get("chat") if isinstance(message, dict) else None
            if isinstance(chat, dict) and "id" in chat:
                return ("chat", chat["id"])
    return ("update", update.get("update_id"))

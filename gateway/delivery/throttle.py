"""How often one chat may be updated: one throttle per chat, shared by its replies.

Every update of a streamed reply (its first message, an edit, a draft, the final
edit, and while it streams each further part's message) takes the chat's
throttle, so however many replies stream at once in a group the chat sees at
most one such update per interval. Flood control (a 429 with `retry_after`)
pauses the chat's updates until then. The further parts that `finish` sends at
the end are left to the platform's own rate limiter.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]

MAX_CHATS = 10_000
KEPT_TIMES = 10_000  # update times kept per chat, for `max_per_interval`


class ChatThrottle:
    """The pace of updates in one chat: at most one per `interval` seconds."""

    def __init__(
        self, interval: float, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep
    ) -> None:
        self.interval = interval
        self.edits = 0  # updates that went (messages, edits, drafts)
        self.edit_times: deque[float] = deque(maxlen=KEPT_TIMES)
        self._clock = clock
        self._sleep = sleep
        self._next = float("-inf")  # the next update may go at this time
        self._paused_until = float("-inf")

    def ready(self) -> bool:
        """Whether an update may go now."""
        return self._clock() >= self._free_at()

    def used(self) -> None:
        """An update is going now (call it right before the platform call)."""
        now = self._clock()
        self.edits += 1
        self.edit_times.append(now)
        self._next = now + self.interval

    def returned(self) -> None:
        """The update's platform call returned: the next one waits a full interval from
        now, so calls slowed on the way (a busy loop, a rate limiter) never arrive closer
        together than `interval`."""
        self._next = max(self._next, self._clock() + self.interval)

    def pause(self, seconds: float) -> None:
        """Flood control: no update before `seconds` from now."""
        self._paused_until = max(self._paused_until, self._clock() + max(0.0, seconds))

    async def wait(self) -> None:
        """Until an update may go (sleeps; the caller then calls `used` at once)."""
        while (delay := self._free_at() - self._clock()) > 0:
            await self._sleep(delay)

    def max_per_interval(self) -> int:
        """The most updates seen in any window of `interval` seconds."""
        return max_per_window(self.edit_times, self.interval)

    def _free_at(self) -> float:
        return max(self._next, self._paused_until)


class Throttles:
    """The throttles of the chats an adapter serves, by chat key; the least recently
    used is dropped past `max_chats` (a dropped chat starts afresh)."""

    def __init__(
        self,
        interval: float,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        max_chats: int = MAX_CHATS,
    ) -> None:
        self.interval = interval
        self._clock = clock
        self._sleep = sleep
        self._max = max_chats
        self._chats: OrderedDict[str, ChatThrottle] = OrderedDict()

    def __len__(self) -> int:
        return len(self._chats)

    def for_chat(self, chat_key: str) -> ChatThrottle:
        """The throttle of `chat_key`, made on first use."""
        throttle = self._chats.get(chat_key)
        if throttle is None:
            throttle = self._chats[chat_key] = ChatThrottle(self.interval, self._clock, self._sleep)
            while len(self._chats) > self._max:
                self._chats.popitem(last=False)
        else:
            self._chats.move_to_end(chat_key)
        return throttle

    def max_per_interval(self) -> int:
        """The highest update rate seen in any chat kept: updates per `interval`."""
        return max((t.max_per_interval() for t in self._chats.values()), default=0)


def max_per_window(times: Iterable[float], window: float) -> int:
    """The most of `times` inside any half-open span [t, t + window)."""
    ordered = sorted(times)
    best = 0
    start = 0
    for end, moment in enumerate(ordered):
        while ordered[start] <= moment - window:
            start += 1
        best = max(best, end - start + 1)
    return best

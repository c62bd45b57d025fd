"""Long polling of Telegram's ``getUpdates`` that only a refused token ends.

`LongPoll` fetches a batch, hands each update out, and confirms the batch (the
next ``getUpdates`` offset) once every update was stored or finished. Any
failure of a fetch (a network error, a 5xx, a 403, a 409, an answer that is not
JSON such as a proxy's HTML page, ``{"ok": false}``, a result that is not a list)
is retried with a capped exponential backoff; each kind of failure is logged
once until polling recovers, and the recovery once. A refused token (401 or 404
on ``getUpdates``) cannot be retried away: the poll logs one line and returns,
and the adapter ends.

The updates of a batch are read one by one by `UpdatesRequest`, the connection
PTB uses for ``getUpdates``: one that python-telegram-bot cannot parse is left
out of the batch and logged with its update id (never its content), and the
offset still moves past it, so it is confirmed and never fetched again.

An update whose handling failed before it was stored (its store unavailable)
is not confirmed: the offset stops at it, and after a doubling pause it is
fetched again with what came after it; the updates of that batch that were
handled are remembered by id and not handled twice. One that keeps failing is
skipped after `REDELIVERIES` fetches, logged, so one bad update never stops
the bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from telegram import Update
from telegram.error import InvalidToken, RetryAfter, TelegramError
from telegram.ext import ExtBot
from telegram.request import HTTPXRequest

from gateway.adapters.telegram_webhook import Handling

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ("message", "edited_message", "callback_query")  # Telegram sends no others
MAX_LOGGED_CHARS = 200  # of a failure's text: a proxy's error page is not logged whole
REDELIVERIES = 5  # fetches of an update whose handling failed before it is skipped
REMEMBERED = 1000  # ids of updates handled, not handled again when fetched again


class UpdatesRequest(HTTPXRequest):
    """The ``getUpdates`` connection, reading each answer's updates one by one.

    After each answer, `last_id` is its highest update id (None: no update) and
    `rejected` holds the ids of the updates PTB could not parse, which are left out
    of the result. An answer that is not a JSON object, or whose result is not a
    list, is a `TelegramError`.
    """

    def __init__(self) -> None:
        super().__init__(connection_pool_size=1)  # what PTB gives its getUpdates connection
        self.last_id: int | None = None
        self.rejected: list[tuple[int | None, str]] = []  # (update id, the parser's error)

    def parse_json_payload(self, payload: bytes) -> dict[str, Any]:  # type: ignore[override]
        """The answer's JSON object (error answers pass through as they are)."""
        self.last_id, self.rejected = None, []
        try:
            data = json.loads(payload.decode("utf-8", "replace"))
        except ValueError:
            start = payload[:60].decode("utf-8", "replace")
            raise TelegramError(f"the answer was not JSON (it starts {start!r})") from None
        if not isinstance(data, dict):
            raise TelegramError("the answer was not a JSON object")
        if "result" not in data:
            return data  # an error answer; PTB reads its description and status
        result = data["result"]
        if not isinstance(result, list):
            raise TelegramError("the answer's result was not a list of updates")
        return {**data, "result": self._parseable(result)}

    def _parseable(self, raw: list[Any]) -> list[dict[str, Any]]:
        kept: list[dict[str, Any]] = []
        ids: list[int] = []
        for item in raw:
            update_id = _update_id(item)
            if update_id is not None:
                ids.append(update_id)
            try:
                Update.de_json(item, None)
            except Exception as error:  # any failure of PTB's parser rejects that update only
                self.rejected.append((update_id, f"{type(error).__name__}: {error}"))
            else:
                kept.append(item)
        if raw and not ids:
            raise TelegramError("the answer's updates had no update ids")
        self.last_id = max(ids, default=None)
        return kept


class LongPoll:
    """Fetch, hand out, confirm; forever, unless the token is refused."""

    def __init__(
        self,
        bot: ExtBot[Any],
        request: UpdatesRequest,
        dispatch: Callable[[Update], Handling],
        *,
        timeout: float,
        stopping: asyncio.Event,
        clock: Callable[[], float],
        backoff: tuple[float, float],
    ) -> None:
        """`dispatch` starts handling an update and gives its `Handling` (done once it is
        stored or done with, `ok` unless it failed first); `backoff` is the first and the
        longest wait between failed fetches."""
        self._bot, self._request, self._dispatch = bot, request, dispatch
        self._timeout, self._stopping = timeout, stopping
        self._failures = Failures(clock, *backoff)
        self._backoff = backoff
        self.offset = 0  # every update below it is confirmed, or safe to confirm
        self._handled: OrderedDict[int, None] = OrderedDict()  # ids handled, the latest last
        self._failed: dict[int, int] = {}  # update id -> fetches whose handling failed
        self._retry = 0.0  # the pause before fetching a failed update again; doubles

    async def run(self) -> None:
        """Poll until stopped (cancelled) or the token is refused (logged, then returns)."""
        while not self._stopping.is_set():
            try:
                updates = await self._fetch()
            except InvalidToken:
                log.error("telegram: the bot token was refused while polling; stopping")
                return
            except Exception as error:  # every other failure is retried: the top of the task
                await self._pause(self._failures.failed(error))
                continue
            self._failures.recovered()
            await self._hand_out(updates)

    async def _fetch(self) -> tuple[Update, ...]:
        try:
            return await self._bot.get_updates(
                offset=self.offset,
                timeout=int(self._timeout),
                allowed_updates=list(ALLOWED_UPDATES),
                read_timeout=self._timeout + 10,
            )
        except KeyError:  # PTB reads a 200's "result" unchecked: {"ok": false} ends here
            raise TelegramError("the answer had no result (ok: false)") from None

    async def _hand_out(self, updates: tuple[Update, ...]) -> None:
        """Handle the batch; once each update is stored, move the offset past all of it."""
        for update_id, reason in self._request.rejected:
            log.warning(
                "telegram: update %s could not be read and is skipped (%s)", update_id, reason
            )
        last_id = self._request.last_id
        handled = [
            (u.update_id, self._dispatch(u)) for u in updates if u.update_id not in self._handled
        ]
        if handled:
            await asyncio.gather(*(handling.done.wait() for _, handling in handled))
        failed = [
            update_id for update_id, handling in handled if not self._settled(update_id, handling)
        ]
        if failed:  # fetched again from the first that failed, after a pause
            self.offset = max(self.offset, min(failed))
            self._retry = min(max(self._retry * 2, self._backoff[0]), self._backoff[1])
            await self._pause(self._retry)
            return
        self._retry = 0.0
        if last_id is not None:
            self.offset = max(self.offset, last_id + 1)

    def _settled(self, update_id: int, handling: Handling) -> bool:
        """Whether the update is done with: handled, or failed too often (logged, skipped)."""
        if not handling.ok:
            tries = self._failed[update_id] = self._failed.get(update_id, 0) + 1
            if tries < REDELIVERIES:
                return False
            log.error("telegram: update %s failed %d times; skipped", update_id, tries)
        self._failed.pop(update_id, None)
        self._handled[update_id] = None
        while len(self._handled) > REMEMBERED:
            self._handled.popitem(last=False)
        return True

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)


class Failures:
    """Failed fetches in a row: the backoff, and one log line per kind of failure."""

    def __init__(self, clock: Callable[[], float], first: float, most: float) -> None:
        self._clock, self._first, self._most = clock, first, most
        self._kinds: set[str] = set()
        self._delay = 0.0
        self._since: float | None = None

    def failed(self, error: Exception) -> float:
        """Record a failure; the seconds to wait before the next attempt (at most the cap)."""
        kind = _kind(error)
        if kind not in self._kinds:
            self._kinds.add(kind)
            text = str(error)[:MAX_LOGGED_CHARS]
            log.warning(
                "telegram: polling failed (%s: %s); retrying with backoff",
                type(error).__name__,
                text,
                exc_info=None if isinstance(error, TelegramError) else error,  # a bug's, once
            )
        if self._since is None:
            self._since = self._clock()
        if isinstance(error, RetryAfter):
            wait = error.retry_after
            seconds = wait.total_seconds() if isinstance(wait, dt.timedelta) else float(wait)
            return min(seconds, self._most)
        self._delay = min(max(self._delay * 2, self._first), self._most)
        return self._delay

    def recovered(self) -> None:
        """A fetch succeeded: logged once after failures; the next failure is new again."""
        if self._since is not None:
            log.info("telegram: polling recovered after %.1f s", self._clock() - self._since)
        self._kinds.clear()
        self._delay, self._since = 0.0, None


def _kind(error: Exception) -> str:
    """What makes two failures the same: the class, and for PTB's plain TelegramError
    (its catch-all, and ours for odd answers) the text as well."""
    if type(error) is TelegramError:
        return f"TelegramError: {error}"
    return type(error).__name__


def _update_id(item: Any) -> int | None:
    value = item.get("update_id") if isinstance(item, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None

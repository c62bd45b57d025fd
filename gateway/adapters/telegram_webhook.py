"""Telegram's webhook, served by our own small aiohttp server: 200 only once stored.

Telegram POSTs each update as JSON to ``telegram.webhook.url``; any number of
replicas may listen behind a reverse proxy, which picks one. `WebhookServer`
answers a request as follows:

- slow, idle or too many connections: see `webhook_guard` (a request whose
  body is not all read within the body timeout: 408, its connection closed);
- the ``X-Telegram-Bot-Api-Secret-Token`` header differs from the secret
  (compared in constant time), or is missing: 403, nothing handled;
- the replica is stopping (`stopping` is set): 503, nothing handled, so
  Telegram (or the proxy) delivers it again, maybe to another replica;
- the body is not a JSON object (or nested too deeply to decode): 400, counted
  and logged in one line (`webhook_guard.Misbehaviour`), nothing handled. Telegram never
  sends one, so the sender is not Telegram (or a proxy mangled it) and a retry
  cannot help;
- a JSON object python-telegram-bot cannot parse as an update: 200, logged by
  its update id (never its content) and skipped, like an unparsable update of
  long polling. A 4xx or 5xx would only make Telegram send it again and again;
- an update: handed to `dispatch`, exactly as long polling hands it out, and
  answered 200 once its `Handling` is done (the update is stored, or nothing of
  it needs keeping), 503 if its handling failed or was cancelled before it was
  stored, and 503 when it is not done within `store_timeout` seconds (it goes
  on; the copy Telegram sends again is handled once, see below).

The same update delivered twice to one replica (Telegram retried after a slow
answer) is handled once: a copy that arrives while the first is being handled
waits for that one's outcome, and one that arrives after it was stored is
answered 200 at once (the last `REMEMBERED` update ids are kept). A copy
delivered to another replica is stored once by the session store (a message's
platform id is unique in its session) and answered once by the turns.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from aiohttp import ClientPayloadError, web
from telegram import Update
from telegram.ext import ExtBot

from gateway.adapters.webhook_guard import ConnectionGuard, ConnectionLimits, listen

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
STORE_TIMEOUT = 25.0  # seconds a request waits for its update to be stored (Telegram: ~60)
REMEMBERED = 4096  # update ids whose outcome is kept, to answer a repeated delivery
NO_SECRET = "a request without the secret token was refused"
NOT_JSON = "a request whose body is not a JSON object was refused"
SLOW_BODY = "a request whose body did not arrive in time was refused"
BROKEN_BODY = "a connection closed while sending its request body"


class Handling:
    """One update being handled: `done` is set once it is stored or done with; `ok`
    tells which: True unless its handling failed or was cancelled before it was stored."""

    def __init__(self) -> None:
        self.done = asyncio.Event()
        self.ok = False

    def stored(self) -> None:
        """The update can no longer be lost (an inbox's `on_stored`)."""
        self.ok = True
        self.done.set()

    def ended(self, ok: bool) -> None:
        """Handling is over: `ok` if it ended without an error (or it was stored before)."""
        self.ok = self.ok or ok
        self.done.set()


Dispatch = Callable[[Update], Handling]


class WebhookServer:
    """Listens on `listen`:`port` at `path`; each POST is one update (see the module)."""

    def __init__(
        self,
        bot: ExtBot[Any],
        dispatch: Dispatch,
        *,
        listen: str,
        port: int,
        path: str,
        secret: str,
        stopping: asyncio.Event,
        store_timeout: float = STORE_TIMEOUT,
        limits: ConnectionLimits = ConnectionLimits(),  # noqa: B008 - frozen
    ) -> None:
        self._limits = limits
        self._bot, self._dispatch, self._stopping = bot, dispatch, stopping
        self._listen, self._port, self._timeout = listen, port, store_timeout
        self._path = "/" + path.lstrip("/")
        self._secret = secret.encode()
        self._handlings: OrderedDict[int, Handling] = OrderedDict()
        self._runner: web.AppRunner | None = None
        self._listening: asyncio.Server | None = None
        self.guard: ConnectionGuard | None = None  # once started

    async def start(self) -> None:
        """Listen; `OSError` when the address cannot be bound."""
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_post(self._path, self._post)
        guard = ConnectionGuard(self._limits)
        app.middlewares.append(guard.middleware)
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            shutdown_timeout=1.0,
            lingering_time=self._limits.body_timeout,  # a refused request's unread body
        )
        await runner.setup()
        assert runner.server is not None  # set up
        try:
            self._listening = await listen(guard, runner.server, self._listen, self._port)
        except OSError:
            await runner.cleanup()
            raise
        self._runner, self.guard = runner, guard
        log.info("telegram: webhook listening on %s:%s%s", self._listen, self._port, self._path)

    async def close(self) -> None:
        """Stop listening; requests still waiting are answered first (briefly)."""
        listening, self._listening = self._listening, None
        if listening is not None:
            listening.close()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        if self.guard is not None:
            self.guard.misbehaviour.flush()

    async def _post(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            self._note(NO_SECRET)
            return web.Response(status=403)
        if self._stopping.is_set():
            return web.Response(status=503, text="stopping")
        try:
            body = await asyncio.wait_for(request.read(), self._limits.body_timeout)
        except TimeoutError:
            self._note(SLOW_BODY)
            answer = web.Response(status=408, text="the body did not arrive in time")
            answer.force_close()
            return answer
        except (ConnectionError, ClientPayloadError):
            self._note(BROKEN_BODY)
            raise web.HTTPBadRequest() from None
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested too deeply
            data = None
        if not isinstance(data, dict):
            self._note(NOT_JSON)
            return web.Response(status=400, text="expected an update as a JSON object")
        try:
            update = Update.de_json(data, self._bot)
        except Exception as error:  # any failure of PTB's parser: this update only
            update_id = data.get("update_id")
            log.warning(
                "telegram: update %s could not be read and is skipped (%s: %s)",
                update_id if isinstance(update_id, int) else None,
                type(error).__name__,
                error,
            )
            return web.Response(status=200)
        return await self._answer(update)

    def _note(self, kind: str) -> None:
        if self.guard is not None:
            self.guard.misbehaviour.note(kind)

    async def _answer(self, update: Update) -> web.Response:
        handling = self._handling(update)
        try:
            await asyncio.wait_for(handling.done.wait(), self._timeout)
        except TimeoutError:
            log.warning(
                "telegram: update %s not stored within %g s; Telegram will send it again",
                update.update_id,
                self._timeout,
            )
            return web.Response(status=503, text="not stored in time")
        if not handling.ok:
            return web.Response(status=503, text="not stored")
        return web.Response(status=200)

    def _handling(self, update: Update) -> Handling:
        """The update's handling: the one under way or stored, else a new one."""
        known = self._handlings.get(update.update_id)
        if known is not None and (known.ok or not known.done.is_set()):
            log.info("telegram: update %s delivered again; handled once", update.update_id)
            return known
        handling = self._dispatch(update)
        self._handlings[update.update_id] = handling
        self._handlings.move_to_end(update.update_id)
        while len(self._handlings) > REMEMBERED:
            self._handlings.popitem(last=False)
        return handling

"""The webhook's connections under slow and hostile clients: timeouts, a cap, one log line.

Anyone who can reach the webhook's port can open connections, no secret needed.
`ConnectionGuard` stands between the listening socket and aiohttp's request
handlers (it is the protocol factory given to ``loop.create_server``):

- a connection that has not sent a whole request head (request line and
  headers) within `ConnectionLimits.header_timeout` seconds of being opened, or
  of its previous request being answered (keep-alive), is closed (a quiet
  keep-alive connection, such as Telegram's own, without being counted);
- a request whose body is not all read within `body_timeout` seconds is
  answered 408 and its connection closed (the server's `_post` enforces it);
- at most `max_connections` are open at once: a new connection beyond it
  makes room by closing the oldest connection still waiting for a request head
  (an idle or slow one: a real request sends its head at once, so it is the
  newcomer that gets served); when every open connection has a request under
  way, the newcomer is closed as soon as it is accepted, before any byte is
  read. The file descriptors held stay near the cap, whatever the clients do.

Each kind of misbehaviour is counted by `Misbehaviour` and logged in one line,
the first time and then at most once every `LOG_INTERVAL` seconds, with the
count so far: never a traceback, never a line per connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

log = logging.getLogger(__name__)

HEADER_TIMEOUT = 10.0  # seconds a connection gets to send a whole request head
BODY_TIMEOUT = 10.0  # seconds a request gets to send its whole body
MAX_CONNECTIONS = 256  # connections open at once (well under the common 1,024 files)
LOG_INTERVAL = 60.0  # seconds between two log lines of one kind of misbehaviour


@dataclass(frozen=True)
class ConnectionLimits:
    """What one webhook server tolerates (``telegram.webhook`` in the config)."""

    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    max_connections: int = MAX_CONNECTIONS


class Misbehaviour:
    """Counts each kind of misbehaviour; logs a kind the first time, then at most once
    every `interval` seconds, and what was not logged yet at `flush`."""

    def __init__(self, interval: float = LOG_INTERVAL) -> None:
        self._interval = interval
        self.counts: dict[str, int] = {}
        self._logged: dict[str, tuple[float, int]] = {}  # kind: (when, count then)

    def note(self, kind: str) -> None:
        """One more of `kind` (a sentence saying what happened, without the count)."""
        count = self.counts[kind] = self.counts.get(kind, 0) + 1
        last = self._logged.get(kind)
        now = time.monotonic()
        if last is None or now - last[0] >= self._interval:
            self._log(kind, count, now)

    def flush(self) -> None:
        """Log each kind whose count grew since its last line."""
        for kind, count in self.counts.items():
            if self._logged.get(kind, (0.0, 0))[1] != count:
                self._log(kind, count, time.monotonic())

    def _log(self, kind: str, count: int, now: float) -> None:
        self._logged[kind] = (now, count)
        log.warning("telegram: webhook: %s (%d so far)", kind, count)


NO_HEAD = "a connection sent no whole request head in time and was closed"
OVER_CAP = "the cap of open connections was reached: one waiting for its head was closed"
REFUSED = "the cap of open connections was reached, each busy: a new one was closed at once"


class _Refused(asyncio.Protocol):
    """A connection over the cap: closed on arrival, nothing read."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class _Guarded(asyncio.Protocol):
    """aiohttp's handler of one connection, with a deadline for each request head."""

    def __init__(self, guard: ConnectionGuard, inner: RequestHandler) -> None:
        self._guard, self.inner = guard, inner
        self._transport: asyncio.BaseTransport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._served = self._sent = False  # a request answered; bytes since the last

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._guard.opened(self)
        self.inner.connection_made(transport)
        self.waiting()

    def connection_lost(self, exc: BaseException | None) -> None:
        self.busy()
        self._guard.lost(self)
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._sent = True
        self.inner.data_received(data)

    def eof_received(self) -> None:
        self.inner.eof_received()  # None: the transport closes itself

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    @property
    def idle(self) -> bool:
        """Waiting for a request head (the header timeout runs)."""
        return self._timer is not None

    def evict(self) -> None:
        """Closed to make room for a newcomer (see the module)."""
        self.busy()
        if self._transport is not None:
            self._transport.close()

    def waiting(self) -> None:
        """No request under way: the next head must come within the header timeout."""
        self.busy()
        self._sent = False
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._guard.limits.header_timeout, self._no_head)

    def busy(self) -> None:
        """A request head arrived (or the connection is gone): no deadline for one."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def started(self) -> None:
        """A request head arrived."""
        self._served = True
        self.busy()

    def _no_head(self) -> None:
        """Too late: closed; counted unless it is a quiet keep-alive connection."""
        self._timer = None
        if self._transport is not None and not self._transport.is_closing():
            if self._sent or not self._served:
                self._guard.misbehaviour.note(NO_HEAD)
            self._transport.close()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConnectionGuard:
    """The protocol factory of one webhook server (see the module)."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.server: web.Server | None = None  # aiohttp's, once its runner is set up
        self.misbehaviour = Misbehaviour()
        self._open: dict[RequestHandler, _Guarded] = {}

    @property
    def open(self) -> int:
        """Connections open now (accepted and not closed, over the cap excluded)."""
        return len(self._open)

    @property
    def reading(self) -> int:
        """Connections with a request under way (its body being read, or it answered)."""
        return sum(1 for connection in self._open.values() if not connection.idle)

    def __call__(self) -> asyncio.Protocol:
        if len(self._open) >= self.limits.max_connections:
            oldest = next((c for c in self._open.values() if c.idle), None)
            if oldest is None:
                self.misbehaviour.note(REFUSED)
                return _Refused()
            self.misbehaviour.note(OVER_CAP)
            self.lost(oldest)
            oldest.evict()
        assert self.server is not None  # set by `listen`
        return _Guarded(self, self.server())

    def opened(self, connection: _Guarded) -> None:
        self._open[connection.inner] = connection

    def lost(self, connection: _Guarded) -> None:
        self._open.pop(connection.inner, None)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Each request: no head deadline while it is handled, a new one once answered."""
        connection = self._open.get(request.protocol) if request.protocol else None
        if connection is not None:
            connection.started()
        answer = None
        try:
            answer = await handler(request)
            return answer
        finally:
            if connection is not None and (answer is None or answer.keep_alive is not False):
                connection.waiting()  # if it is closed meanwhile, `connection_lost` undoes it


async def listen(
    guard: ConnectionGuard, server: web.Server, host: str, port: int
) -> asyncio.Server:
    """Listen on `host`:`port` for `server` (its runner set up), each connection made by
    `guard`; `OSError` if the address cannot be bound."""
    guard.server = server
    loop = asyncio.get_running_loop()
    return await loop.create_server(guard, host, port, reuse_address=True)

"""`/healthz` and `/metrics` for a supervisor (Docker's HEALTHCHECK, Prometheus).

`HealthServer` is a small aiohttp web server (`health.listen`:`health.port`)
that `mnemo run` starts before its adapters when `health.enabled` is on (the
image turns it on). ``GET /healthz`` answers 200 "ready" only when the replica
can take updates: every adapter is connected (its `ready` is set and it has not
ended) and the storage answers (on SQLite the data directory is writable; on
PostgreSQL a one-row read through the session store comes back within
`STORE_TIMEOUT`); otherwise 503 with one line per thing not ready. From the
first stop signal it answers 503 "stopping", before the adapters stop and while
the turns in flight drain, so that a load balancer sends the updates elsewhere.
``GET /metrics`` answers the bot's `Metrics` in the Prometheus text format,
its queue depths read at that moment. Neither shows a message, a person or a
secret.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from gateway.app import Bot
from gateway.config import Config, HealthConfig
from gateway.config_yaml import capped
from gateway.messages import Adapter
from gateway.metrics import CONTENT_TYPE
from gateway.urls import redact_url_credentials
from memory_core import SessionBackend

log = logging.getLogger(__name__)

STATE_DB = "state.db"
STORE_TIMEOUT = 2.0  # seconds PostgreSQL gets to answer one /healthz


class HealthServer:
    """Serves /healthz and /metrics for one bot and its adapters."""

    def __init__(
        self,
        config: HealthConfig,
        bot: Bot,
        adapters: Sequence[Adapter],
        stopping: asyncio.Event | None = None,
        store_timeout: float = STORE_TIMEOUT,
    ) -> None:
        """`stopping`: set once the service is stopping (then it is not ready);
        `store_timeout`: seconds the storage gets to answer."""
        self._config = config
        self._store_timeout = store_timeout
        self._stopping = stopping if stopping is not None else asyncio.Event()
        self._bot = bot
        self._adapters = list(adapters)
        self._runner: web.AppRunner | None = None
        self.port: int | None = None  # the port listened on, once started (0 picks one)

    async def start(self) -> None:
        """Listen; an address that cannot be bound is an `OSError` (the caller's line)."""
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self._config.listen, self._config.port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        server = site._server  # aiohttp keeps the bound sockets only there
        sockets = getattr(server, "sockets", None) or ()
        self.port = sockets[0].getsockname()[1] if sockets else self._config.port
        log.info("health: /healthz and /metrics on %s:%d", self._config.listen, self.port)

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def not_ready(self) -> list[str]:
        """What is not ready, one line each (empty: ready)."""
        if self._stopping.is_set():
            return ["stopping"]
        problems = [
            f"{a.platform}: not connected" if not a.done.is_set() else f"{a.platform}: ended"
            for a in self._adapters
            if a.done.is_set() or not a.ready.is_set()
        ]
        services = self._bot.services
        problem = await store_problem(services.config, services.sessions, self._store_timeout)
        if problem is None and (failing := self._bot.conversations.outage.seconds()) is not None:
            problem = f"writes failing for {failing:.0f} s"
        if problem is not None:
            problems.append(f"store: {problem}")
        return problems

    async def _healthz(self, request: web.Request) -> web.Response:
        problems = await self.not_ready()
        if problems:
            return web.Response(text="not ready\n" + "\n".join(problems) + "\n", status=503)
        return web.Response(text="ready\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        bot = self._bot
        queued = []
        for adapter in self._adapters:
            waiting = await bot.services.sessions.queued_messages(adapter.platform)
            queued.append((adapter.platform, len(waiting)))
        bot.metrics.refresh(
            queued,
            (job.running for job in bot.background.jobs()),
            ((a.platform, a.ready.is_set() and not a.done.is_set()) for a in self._adapters),
        )
        return web.Response(body=bot.metrics.text(), headers={"Content-Type": CONTENT_TYPE})


async def store_problem(
    config: Config, sessions: SessionBackend, timeout: float = STORE_TIMEOUT
) -> str | None:
    """Why the storage cannot take a message now, or None: on SQLite the data directory
    must be writable (`unwritable`); on PostgreSQL a one-row read through the session
    store (as cheap as ``SELECT 1``) must come back within `timeout` seconds."""
    if not config.storage.postgres:
        return await asyncio.to_thread(unwritable, config.home)
    try:
        await asyncio.wait_for(sessions.get_session(0), timeout)
    except TimeoutError:
        return f"PostgreSQL did not answer within {timeout:g} s"
    except Exception as exc:  # any failure of the read: not ready, said in one line
        first = str(exc).strip().splitlines()[:1]
        detail = capped(redact_url_credentials(first[0]), 160) if first else ""
        return f"PostgreSQL: {type(exc).__name__}" + (f": {detail}" if detail else "")
    return None


def unwritable(home: Path) -> str | None:
    """Why the data directory (and its state.db) cannot be written, or None when it can:
    a file is created and removed there, as the store's own writes would."""
    database = home / STATE_DB
    if database.exists() and not os.access(database, os.W_OK):
        return f"{database} is not writable"
    try:
        with tempfile.NamedTemporaryFile(dir=home, prefix=".healthz-"):
            pass
    except OSError as exc:
        return f"{home} is not writable ({exc.strerror or exc})"
    return None

"""A loopback aiohttp server that every fake builds on.

A fake subclasses `FakeServer`, adds its routes in `setup_routes`, and is then
usable in three ways: ``async with Fake() as fake`` in a test (port 0, so
tests never collide), ``await fake.start()`` / ``await fake.stop()``, or as a
standalone process through `run_standalone` (``python -m tests.fakes.X --port
N``) so a real ``mnemo`` subprocess can be pointed at it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Self, TypeVar

from aiohttp import web

from tests.timing import scaled, wait_until

__all__ = ["FakeServer", "json_response", "run_standalone", "wait_until"]

HOST = "127.0.0.1"
F = TypeVar("F", bound="FakeServer")


def json_response(payload: Any, status: int = 200, **headers: str) -> web.Response:
    """JSON with a Content-Type of exactly ``application/json`` (discord.py checks it)."""
    body = json.dumps(payload, ensure_ascii=False).encode()
    return web.Response(
        body=body, status=status, headers={"Content-Type": "application/json", **headers}
    )


class FakeServer:
    """Base class: an aiohttp application on 127.0.0.1 with a port chosen at start."""

    def __init__(self) -> None:
        self.app = web.Application(client_max_size=16 * 1024 * 1024)
        self.setup_routes(self.app)
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    def setup_routes(self, app: web.Application) -> None:
        raise NotImplementedError  # each fake adds its own routes

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the fake server is not started")
        return f"http://{HOST}:{self.port}"

    async def start(self, port: int = 0) -> str:
        self._runner = web.AppRunner(self.app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, HOST, port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


@contextmanager
def serving_in_thread(fake: F) -> Iterator[F]:
    """Run `fake` on a private event loop in a daemon thread for the block's duration.

    For sync tests of code that calls `asyncio.run` itself (the CLI).
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(fake.start(), loop).result(timeout=scaled(5))
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(timeout=scaled(5))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=scaled(5))
        loop.close()


def run_standalone(
    factory: Callable[[argparse.Namespace], FakeServer],
    description: str,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    """Entry point for ``python -m tests.fakes.X --port N``: serve until SIGINT/SIGTERM.

    `add_arguments` lets a fake add its own options; `factory` gets them parsed.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args()

    async def serve() -> None:
        fake = factory(args)
        url = await fake.start(args.port)
        print(f"listening on {url}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await fake.stop()

    asyncio.run(serve())

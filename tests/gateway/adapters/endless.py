"""A loopback file server whose every file is an endless chunked stream with no length:
what a download whose size nobody said (or a lying server) looks like to a client."""

from __future__ import annotations

from aiohttp import web

from tests.fakes.base import FakeServer

CHUNK = b"e" * 65536


class EndlessFiles(FakeServer):
    """Serves ``GET /<anything>`` as chunks without end, until the client goes away;
    `requests` lists the paths asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[str] = []

    def setup_routes(self, app: web.Application) -> None:
        app.router.add_get("/{path:.*}", self._stream)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(request.path)
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            while True:
                await response.write(CHUNK)
        except (ConnectionError, RuntimeError):  # the client closed the connection
            pass
        return response

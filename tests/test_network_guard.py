import asyncio
import socket

import pytest

from tests.conftest import NetworkAccessError


def test_public_address_fails() -> None:
    with socket.socket() as s, pytest.raises(NetworkAccessError):
        s.connect(("93.184.216.34", 80))


def test_private_address_fails() -> None:
    with socket.socket() as s, pytest.raises(NetworkAccessError):
        s.connect_ex(("10.0.0.1", 80))


def test_name_resolution_of_public_host_fails() -> None:
    with pytest.raises(NetworkAccessError):
        socket.getaddrinfo("example.com", 443)


async def test_asyncio_connection_fails() -> None:
    with pytest.raises(NetworkAccessError):
        await asyncio.open_connection("8.8.8.8", 53)


async def test_loopback_is_allowed() -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()
        await writer.wait_closed()

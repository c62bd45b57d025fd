"""Test-wide fixtures: the network guard and an isolated environment; every test's
pytest-timeout limit scaled by `MNEMO_TEST_TIME_SCALE` (tests/timing.py)."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from tests.timing import scaled

pytest_plugins = ["tests.postgres"]  # pg_url, pg_database


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's time limit (its `timeout` mark, else the ini's `timeout`) times the factor.
    A `--timeout` given on the command line is taken as it is."""
    if config.getoption("timeout", None) is not None:
        return
    default = float(config.getini("timeout") or 0)
    for item in items:
        mark = item.get_closest_marker("timeout")
        seconds = (mark.args[0] if mark.args else mark.kwargs.get("timeout")) if mark else default
        if seconds:  # 0 or None: no limit, which scaling keeps
            rest = mark.args[1:] if mark else ()
            kwargs = {k: v for k, v in (mark.kwargs if mark else {}).items() if k != "timeout"}
            limit = pytest.mark.timeout(scaled(float(seconds)), *rest, **kwargs)
            item.add_marker(limit, append=False)


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


class NetworkAccessError(AssertionError):
    """A test tried to reach a non-loopback address."""


def _is_loopback(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode()
    if not isinstance(host, str):
        return False
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _check(sock: socket.socket, address: object) -> None:
    if sock.family == socket.AF_UNIX:
        return
    host = address[0] if isinstance(address, tuple) else address
    if not _is_loopback(host):
        raise NetworkAccessError(f"test tried to connect to {address!r}; only loopback is allowed")


def _guarded_connect(self: socket.socket, address: object) -> None:
    _check(self, address)
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    _check(self, address)
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
    if host is not None and not _is_loopback(host):
        raise NetworkAccessError(f"test tried to resolve {host!r}; only loopback is allowed")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection to a non-loopback address fails the test."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_getaddrinfo)


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test sees the developer's secrets, proxies or data directory."""
    for var in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "TELEGRAM_BOT_TOKEN",
        "DISCORD_BOT_TOKEN",
        "MNEMO_SKILLS_DIR",
        "MNEMO_CONFIG",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("MNEMO_HOME", str(tmp_path_factory.mktemp("mnemo-home")))

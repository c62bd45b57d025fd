"""Point discord.py at the configured REST and gateway endpoints.

discord.py has no constructor argument for its endpoints: the REST base is the
class attribute ``discord.http.Route.BASE`` (every ``Route`` builds its URL from
it) and the gateway is ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY``.
Both are process-global, so this module is the one place that changes them.
The config keys ``discord.api_base`` and ``discord.gateway_url`` exist so that a
self-hosted proxy or a loopback test fake can stand in for discord.com.

Changing the endpoints affects every discord.py client in the process; callers
that change them temporarily (tests) restore the previous values afterwards,
with `restore_discord_endpoints` or the `discord_endpoints` context manager.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import discord.gateway
import discord.http
import yarl

from gateway.errors import ConfigError
from gateway.urls import check_url

_API_SCHEMES = ("http", "https")
_GATEWAY_SCHEMES = ("ws", "wss")


@dataclass(frozen=True)
class DiscordEndpoints:
    """The REST base (``…/api/v10``) and the gateway websocket URL discord.py uses."""

    api_base: str
    gateway_url: str


def current_discord_endpoints() -> DiscordEndpoints:
    """The endpoints discord.py uses right now."""
    return DiscordEndpoints(
        api_base=discord.http.Route.BASE,
        gateway_url=str(discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY),
    )


def _checked_url(value: str, schemes: tuple[str, ...], key: str) -> yarl.URL:
    try:
        check_url(value, schemes)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}, got {value!r}") from None
    return yarl.URL(value)


def use_discord_endpoints(api_base: str, gateway_url: str) -> DiscordEndpoints:
    """Make every discord.py client in this process use these endpoints.

    `api_base` is an http(s) URL such as ``http://127.0.0.1:8080/api/v10``
    (a trailing slash is dropped, since discord.py appends paths that start with
    one); `gateway_url` is a ws(s) URL. Both are checked before anything
    changes, so a bad value raises `ConfigError` naming the config key and
    leaves the current endpoints in place. Returns the previous endpoints, for
    `restore_discord_endpoints`.
    """
    _checked_url(api_base, _API_SCHEMES, "discord.api_base")
    gateway = _checked_url(gateway_url, _GATEWAY_SCHEMES, "discord.gateway_url")
    previous = current_discord_endpoints()
    discord.http.Route.BASE = api_base.rstrip("/")
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = gateway
    return previous


def restore_discord_endpoints(previous: DiscordEndpoints) -> None:
    """Put back endpoints returned by `use_discord_endpoints`."""
    discord.http.Route.BASE = previous.api_base
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(previous.gateway_url)


@contextmanager
def discord_endpoints(api_base: str, gateway_url: str) -> Iterator[DiscordEndpoints]:
    """Use these endpoints inside the block and restore the previous ones on exit."""
    previous = use_discord_endpoints(api_base, gateway_url)
    try:
        yield DiscordEndpoints(api_base=api_base.rstrip("/"), gateway_url=gateway_url)
    finally:
        restore_discord_endpoints(previous)

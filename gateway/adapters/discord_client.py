"""The discord.py clients the Discord adapter runs: one plain connection, or some shards.

`EventClient` passes its events to the adapter's `ClientEvents`; `ShardedClient`
(an ``AutoShardedClient``) runs the shards `discord_shards` chose and is ready
only while every one of them is connected. Both make each gateway event parser
but READY's and RESUMED's fail alone (`guard_parsers`): an event discord.py
cannot read is logged and dropped, and the connection goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import discord

log = logging.getLogger("gateway.adapters.discord_adapter")

_VITAL_EVENTS = frozenset({"READY", "RESUMED"})  # a connection is useless without them
Parser = Callable[[Any], None]


Deletion = discord.RawMessageDeleteEvent | discord.RawBulkMessageDeleteEvent


async def _ignored(event: object) -> None:
    """An event nobody asked for."""


@dataclass(frozen=True)
class ClientEvents:
    """Where a client's events go: `ready` set while connected, `setup` once logged in
    (before connecting), then each message and interaction, and each message edit and
    deletion (raw: cached or not)."""

    ready: asyncio.Event
    setup: Callable[[], Awaitable[None]]
    message: Callable[[discord.Message], Awaitable[None]]
    interaction: Callable[[discord.Interaction], Awaitable[None]]
    edit: Callable[[discord.RawMessageUpdateEvent], Awaitable[None]] = _ignored
    delete: Callable[[Deletion], Awaitable[None]] = _ignored


class EventClient(discord.Client):
    """discord.Client whose events go to the adapter."""

    def __init__(self, events: ClientEvents, **options: Any) -> None:
        super().__init__(**options)
        self._events = events
        # the websocket calls these parsers straight from its read loop, where an error
        # would end the connection; the dict is the one each new websocket is given
        guard_parsers(self._connection.parsers)

    async def setup_hook(self) -> None:
        await self._events.setup()

    async def on_ready(self) -> None:
        self._events.ready.set()

    async def on_resumed(self) -> None:
        self._events.ready.set()

    async def on_disconnect(self) -> None:
        self._events.ready.clear()  # discord.py reconnects; /healthz says so meanwhile

    async def on_message(self, message: discord.Message) -> None:
        await self._events.message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self._events.interaction(interaction)

    async def on_raw_message_edit(self, event: discord.RawMessageUpdateEvent) -> None:
        await self._events.edit(event)

    async def on_raw_message_delete(self, event: discord.RawMessageDeleteEvent) -> None:
        await self._events.delete(event)

    async def on_raw_bulk_message_delete(self, event: discord.RawBulkMessageDeleteEvent) -> None:
        await self._events.delete(event)


class ShardedClient(EventClient, discord.AutoShardedClient):
    """The client for some of the bot's shards (``shard_count``, ``shard_ids``): ready
    once all of them are, and not while any one is down (each reconnects on its own)."""

    def __init__(self, events: ClientEvents, **options: Any) -> None:
        super().__init__(events, **options)
        self._all_ready = False
        self._down: set[int] = set()

    async def on_ready(self) -> None:  # every shard has connected once
        self._all_ready = True
        self._update()

    async def on_resumed(self) -> None:
        """Each shard's own event (below) says which one."""

    async def on_disconnect(self) -> None:
        """Each shard's own event (below) says which one."""

    async def on_shard_disconnect(self, shard_id: int) -> None:
        self._down.add(shard_id)
        self._events.ready.clear()

    async def on_shard_ready(self, shard_id: int) -> None:
        self._down.discard(shard_id)
        self._update()

    async def on_shard_resumed(self, shard_id: int) -> None:
        self._down.discard(shard_id)
        self._update()

    def _update(self) -> None:
        if self._all_ready and not self._down:
            self._events.ready.set()


def intents() -> discord.Intents:
    """Servers, their messages, DMs, and message content (privileged); nothing else.
    The message intents bring edits and deletions too (MESSAGE_UPDATE, MESSAGE_DELETE,
    MESSAGE_DELETE_BULK), and message content their new text."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = True
    return wanted


def guard_parsers(parsers: MutableMapping[str, Parser]) -> None:
    """Make each gateway event parser (but READY's and RESUMED's) fail alone: an
    event it cannot read is logged with its type and id, the traceback once per type."""
    failed: set[str] = set()
    for event, parse in list(parsers.items()):
        if event not in _VITAL_EVENTS:
            parsers[event] = _guarded(event, parse, failed)


def _guarded(event: str, parse: Parser, failed: set[str]) -> Parser:
    def guarded(data: Any) -> None:
        try:
            parse(data)
        except Exception as error:  # the top of one event: it is dropped, the connection stays
            first = event not in failed
            failed.add(event)
            log.warning(
                "discord: a %s event (id %s) could not be read and was skipped (%s)",
                event,
                data.get("id") if isinstance(data, dict) else None,
                type(error).__name__,
                exc_info=error if first else None,
            )

    return guarded

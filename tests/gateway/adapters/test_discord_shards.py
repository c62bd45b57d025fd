"""Discord shards split among replicas, with the real discord.py against the fake Discord:
each replica identifies with its own shard, and only replica 0 syncs the slash commands."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.adapters.discord_adapter import DiscordAdapter
from gateway.adapters.discord_shards import DiscordShards, discord_shards
from gateway.config import Config, DiscordConfig, ReplicasConfig, load_config
from gateway.errors import ConfigError
from gateway.messages import CommandSpec
from tests.fakes.base import wait_until
from tests.fakes.discord import DEFAULT_TOKEN, FakeDiscord
from tests.gateway.adapters.inboxes import Inbox

COMMANDS = [CommandSpec("help", "what the bot is")]
DATABASE = "postgresql://mnemo@db/mnemo"
ALICE = 4200000000000000001


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake


def config(dc: FakeDiscord, **fields: Any) -> DiscordConfig:
    values = {"token": DEFAULT_TOKEN, "api_base": dc.api_base, "gateway_url": dc.gateway_url}
    return DiscordConfig(**(values | fields))


async def serve_once(dc: FakeDiscord, adapter: DiscordAdapter) -> dict[str, Any]:
    """Start `adapter`, stop it again; the IDENTIFY payload it sent."""
    await adapter.start(Inbox(), COMMANDS)
    try:
        assert adapter.ready.is_set() and not adapter.done.is_set()
        assert dc.identify is not None
        return dc.identify
    finally:
        await adapter.close()


def synced(dc: FakeDiscord) -> list[str]:
    return [c.route for c in dc.calls if c.method == "PUT" and "/commands" in c.path]


async def test_replica_one_runs_its_shard_and_leaves_the_commands_to_replica_zero(
    dc: FakeDiscord,
) -> None:
    second = DiscordAdapter(
        config(dc), guild_ready_timeout=0.05, replicas=ReplicasConfig(index=1, count=2)
    )
    identify = await serve_once(dc, second)
    assert identify["shard"] == [1, 2]
    assert synced(dc) == []  # replica 1 never touches the commands
    assert dc.commands_synced() == []

    first = DiscordAdapter(
        config(dc), guild_ready_timeout=0.05, replicas=ReplicasConfig(index=0, count=2)
    )
    identify = await serve_once(dc, first)
    assert identify["shard"] == [0, 2]
    assert len(synced(dc)) == 1 and dc.commands_synced() == ["help"]


class Transitions(asyncio.Event):
    """The adapter's `ready`, recording each change."""

    def __init__(self) -> None:
        super().__init__()
        self.changes: list[bool] = []

    def set(self) -> None:
        self.changes.append(True)
        super().set()

    def clear(self) -> None:
        self.changes.append(False)
        super().clear()


async def test_a_shard_that_reconnects_is_not_ready_meanwhile_and_answers_after(
    dc: FakeDiscord,
) -> None:
    inbox = Inbox()
    adapter = DiscordAdapter(
        config(dc, allowed_users=("*",), edit_interval=0.05),
        guild_ready_timeout=0.05,
        commands_factory=None,
        replicas=ReplicasConfig(index=1, count=2),
    )
    adapter.ready = ready = Transitions()
    await adapter.start(inbox, [])
    try:
        assert ready.changes == [True]
        await dc.send_reconnect()  # Discord moves the shard: it resumes on a new socket
        await dc.wait_ready()
        await wait_until(lambda: len(ready.changes) >= 3)
        assert ready.changes == [True, False, True] and ready.is_set()
        await dc.inject_message("still there?", ALICE, guild=False)
        dm = dc.dm_channel_id(ALICE)
        assert await dc.wait_until(lambda: dc.channel_texts(dm)[-1:] == ["echo: still there?"])
    finally:
        await adapter.close()
    assert [m.text for m in inbox.messages] == ["still there?"]
    assert [p["d"]["shard"] for p in dc.gateway_received if p.get("op") == 2] == [[1, 2]]


async def test_without_replicas_or_shards_there_is_one_plain_connection(dc: FakeDiscord) -> None:
    identify = await serve_once(dc, DiscordAdapter(config(dc), guild_ready_timeout=0.05))
    assert "shard" not in identify  # discord.py's plain client: no sharding at all
    assert dc.commands_synced() == ["help"]


async def test_explicit_shard_ids_win_over_the_replicas_split(dc: FakeDiscord) -> None:
    adapter = DiscordAdapter(
        config(dc, shard_count=4, shard_ids=(3,)),
        guild_ready_timeout=0.05,
        replicas=ReplicasConfig(index=1, count=2),
    )
    assert (await serve_once(dc, adapter))["shard"] == [3, 4]
    assert synced(dc) == []


@pytest.mark.parametrize(
    ("fields", "index", "count", "expected"),
    [
        ({}, 0, 1, DiscordShards(None, None, True)),
        ({"shard_count": 2}, 0, 1, DiscordShards(2, None, True)),
        ({}, 2, 3, DiscordShards(3, (2,), False)),
        ({"shard_count": 7}, 1, 3, DiscordShards(7, (1, 4), False)),
        ({"shard_count": 7}, 0, 3, DiscordShards(7, (0, 3, 6), True)),
        ({"shard_count": 4, "shard_ids": (0, 2)}, 1, 2, DiscordShards(4, (0, 2), False)),
    ],
)
def test_shard_i_goes_to_replica_i_modulo_count(
    fields: dict[str, Any], index: int, count: int, expected: DiscordShards
) -> None:
    replicas = ReplicasConfig(index=index, count=count)
    assert discord_shards(DiscordConfig(**fields), replicas) == expected


def test_replicas_and_shards_from_the_environment() -> None:
    env = {"MNEMO_REPLICA_INDEX": "2", "MNEMO_REPLICA_COUNT": "3", "MNEMO_DATABASE_URL": DATABASE}
    loaded = load_config(None, environ=env)
    assert loaded.replicas == ReplicasConfig(index=2, count=3)


ON_POSTGRES = {"storage": {"url": DATABASE}}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (ON_POSTGRES | {"replicas": {"index": 3, "count": 3}}, "index 3 is not below count 3"),
        ({"replicas": {"count": 2}}, "set storage.url"),  # SQLite: one process per data dir
        ({"discord": {"shard_ids": [0]}}, "set shard_count too"),
        ({"discord": {"shard_count": 2, "shard_ids": [2]}}, "2 is not a shard of 0..1"),
        ({"discord": {"shard_count": 2, "shard_ids": [1, 1]}}, "named twice"),
        (
            ON_POSTGRES | {"discord": {"shard_count": 2}, "replicas": {"count": 3}},
            r"shard_count \(2\) is below replicas.count \(3\)",
        ),
    ],
)
def test_a_split_that_cannot_work_is_refused(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Config.model_validate(raw)


def test_a_bad_replica_index_is_one_config_line() -> None:
    env = {"MNEMO_REPLICA_INDEX": "x", "MNEMO_DATABASE_URL": DATABASE}
    with pytest.raises(ConfigError, match=r"^config error: replicas.index: "):
        load_config(None, environ=env)

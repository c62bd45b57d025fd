"""Which Discord shards one `mnemo run` connects, and whether it syncs the slash commands.

Discord splits a bot's servers into shards (server id >> 22, modulo the shard
count); each shard is one gateway connection, and any process may run any set
of them. With several replicas (``replicas.count``) shard i runs on replica
i % count, unless ``discord.shard_ids`` names this process's shards itself. The
slash commands are the same for every shard, so only replica 0 syncs them: the
others would overwrite the same commands and spend the same rate limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import DiscordConfig, ReplicasConfig


@dataclass(frozen=True)
class DiscordShards:
    """`count` shards in all (None: no sharding, one plain connection), `ids` the ones run
    here (None: all of them), and whether this process syncs the slash commands."""

    count: int | None = None
    ids: tuple[int, ...] | None = None
    sync_commands: bool = True

    @property
    def sharded(self) -> bool:
        return self.count is not None


def discord_shards(discord: DiscordConfig, replicas: ReplicasConfig) -> DiscordShards:
    """`discord.shard_ids` when set; else, with several replicas, shard i on replica
    i % count (as many shards as replicas unless `discord.shard_count` says more)."""
    sync = replicas.index == 0
    if discord.shard_ids:
        return DiscordShards(discord.shard_count, discord.shard_ids, sync)
    if replicas.count == 1:
        return DiscordShards(discord.shard_count, None, sync)
    count = discord.shard_count or replicas.count
    ids = tuple(i for i in range(count) if i % replicas.count == replicas.index)
    return DiscordShards(count, ids, sync)

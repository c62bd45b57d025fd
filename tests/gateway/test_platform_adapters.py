"""What the composition root gives each platform when several replicas serve one bot."""

from __future__ import annotations

from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.app import platform_adapters
from gateway.config import load_config


def _telegram(env: dict[str, str]) -> TelegramAdapter:
    config = load_config(None, environ={"TELEGRAM_BOT_TOKEN": "1:abc", **env})
    adapters, modes = platform_adapters(config)
    (adapter,) = adapters
    assert isinstance(adapter, TelegramAdapter) and modes == {"telegram": "polling"}
    return adapter


def test_one_bot_sends_at_telegrams_rate_and_replicas_share_it() -> None:
    assert _telegram({}).overall_max_rate == 30.0
    replicas = {
        "MNEMO_DATABASE_URL": "postgresql://mnemo@db/mnemo",
        "MNEMO_REPLICA_COUNT": "3",
        "MNEMO_REPLICA_INDEX": "2",
    }
    assert _telegram(replicas).overall_max_rate == 10.0  # 3 x 10: the bot's 30 a second

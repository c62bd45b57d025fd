"""What the composition root gives each platform when several replicas serve one bot."""

from __future__ import annotations

from pathlib import Path

from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.app import platform_adapters
from gateway.config import load_config

REPLICAS = {
    "MNEMO_DATABASE_URL": "postgresql://mnemo@db/mnemo",
    "MNEMO_REPLICA_COUNT": "3",
    "MNEMO_REPLICA_INDEX": "2",
}


def _telegram(env: dict[str, str]) -> TelegramAdapter:
    config = load_config(None, environ={"TELEGRAM_BOT_TOKEN": "1:abc", **env})
    adapters, modes = platform_adapters(config)
    (adapter,) = adapters
    assert isinstance(adapter, TelegramAdapter) and modes == {"telegram": "polling"}
    return adapter


def test_one_bot_sends_at_telegrams_rate_and_replicas_share_it() -> None:
    assert _telegram({}).overall_max_rate == 30.0
    assert _telegram(REPLICAS).overall_max_rate == 10.0  # 3 x 10: the bot's 30 a second


def test_the_operator_sets_the_bots_rate_or_turns_the_limit_off(tmp_path: Path) -> None:
    """Paid broadcasts raise Telegram's limit; a bench measures without one (0: no limit)."""
    for rate, share in ((300, 100.0), (0, 0.0)):
        path = tmp_path / "mnemo.yaml"
        path.write_text(f"telegram:\n  calls_per_second: {rate}\n", encoding="utf-8")
        config = load_config(path, environ={"TELEGRAM_BOT_TOKEN": "1:abc", **REPLICAS})
        ((adapter,), _) = platform_adapters(config)
        assert isinstance(adapter, TelegramAdapter) and adapter.overall_max_rate == share

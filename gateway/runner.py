"""Starting the bot: `mnemo run` and `mnemo chat`."""

from __future__ import annotations

from gateway.config import Config
from gateway.errors import NotAvailableError


def run_bot(config: Config) -> None:
    """Start every configured adapter."""
    raise NotAvailableError(
        "`mnemo run` is not available yet: the agent loop and adapters come in a later issue"
    )


def run_console(config: Config) -> None:
    """Talk to the bot in the terminal."""
    raise NotAvailableError(
        "`mnemo chat` is not available yet: the agent loop comes in a later issue"
    )

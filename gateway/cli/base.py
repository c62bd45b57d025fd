"""Shared plumbing for CLI commands: lazy configuration and clean failures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import click

from gateway.config import Config, load_config
from gateway.errors import GatewayError
from memory_core import MemoryCoreError

T = TypeVar("T")

EXIT_FAILURE = 1
EXIT_CONFIG = 2


@dataclass
class CliState:
    """What the top-level group hands to its commands."""

    config_path: Path | None
    _config: Config | None = field(default=None, repr=False)

    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.config_path)
        return self._config


def fail(message: str, code: int = EXIT_FAILURE) -> None:
    """Print one line on stderr and exit with `code`."""
    click.echo(f"mnemo: {message}", err=True)
    raise SystemExit(code)


def run_command(body: Callable[[], T]) -> T:
    """Run a command body, turning our own errors into one line and an exit code."""
    from gateway.errors import ConfigError

    try:
        return body()
    except ConfigError as exc:
        fail(str(exc), EXIT_CONFIG)
    except (GatewayError, MemoryCoreError) as exc:
        fail(str(exc))
    raise AssertionError("unreachable")

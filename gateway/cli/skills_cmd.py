"""`mnemo skills …` commands."""

from __future__ import annotations

import click


@click.group()
def skills() -> None:
    """Manage skills."""

"""`mnemo memory …` commands."""

from __future__ import annotations

import click


@click.group()
def memory() -> None:
    """Manage memory."""

"""`mnemo sessions …` commands."""

from __future__ import annotations

import click


@click.group()
def sessions() -> None:
    """Manage sessions."""

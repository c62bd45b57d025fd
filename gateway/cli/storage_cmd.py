"""`mnemo storage …`: move a bot's data to PostgreSQL, and check either backend.

`migrate --to URL` copies this data directory (state.db, the memory files with
settings and staged changes, people's skills and the manifest, the access list)
into an empty PostgreSQL database with `memory_core.transfer.migrate_data_dir`,
all of it in one transaction that commits only once counts and digests agree on
both sides: stopped at any point (an error, a difference, a killed process) it
leaves the database empty, and running it again is the fix. It prints what each
store holds there and how many texts held a NUL (stored as U+FFFD, as PostgreSQL
stores them), and leaves the data directory as it was: state.db is opened
read-only, the memory files only read. It holds the directory's instance lock
meanwhile, so no bot writes during the copy. `check` looks over the configured
backend. A URL is never shown with its password.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import click

from gateway.cli.base import EXIT_USAGE, CliState, fail, run_command, visible
from gateway.config import storage_settings
from gateway.errors import InstanceLockedError
from gateway.urls import redact_url_credentials, redact_url_password
from memory_core import StorageSettings

if TYPE_CHECKING:
    from memory_core import MigrationReport  # imported when run: it loads psycopg

_SCHEMES = ("postgresql", "postgres")


@click.group()
def storage() -> None:
    """Move this bot's data into PostgreSQL; check the configured storage."""


@storage.command()
@click.option(
    "--to", "url", required=True, metavar="URL", help="The empty database: postgresql://…"
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def migrate(state: CliState, url: str, yes: bool) -> None:
    """Copy this data directory (sessions, memory, settings, people's skills) into the
    empty PostgreSQL database at URL, verified, all or nothing; the directory stays as it is."""
    shown = redact_url_credentials(url)
    if urlsplit(url).scheme not in _SCHEMES:
        fail(f"--to must be a postgresql:// URL, not {shown!r}", EXIT_USAGE)
    config = run_command(state.config)
    home = config.home
    if config.storage.url is not None:
        fail(
            "this bot already keeps its data in PostgreSQL (storage.url): migrate copies "
            "a SQLite data directory; unset MNEMO_DATABASE_URL to name one"
        )
    if not home.is_dir():
        fail(f"nothing to move: no data directory at {home}")
    if not yes:
        click.confirm(f"Copy the data in {home} into {shown}?", abort=True)
    report = run_command(lambda: _migrate_alone(home, url, storage_settings(config)))
    if not report.kept:
        wrong = ", ".join(part.name for part in report.parts if not part.ok)
        fail(f"the copy differs from the source in {wrong}: nothing was kept in {shown}")
    if report.mapped:
        click.echo(
            f"note: {report.mapped} text{'s' if report.mapped != 1 else ''} held NUL, which "
            "PostgreSQL cannot store: kept with U+FFFD in its place"
        )
    click.echo("verified: digests match")
    pasted = redact_url_password(url)
    where = "" if pasted == url else " with your password in place of ***"
    click.echo(f"next: set MNEMO_DATABASE_URL={pasted}{where} (or storage.url) and start mnemo run")


def _migrate_alone(home: Path, url: str, settings: StorageSettings) -> MigrationReport:
    """The move, holding the data directory's lock: no bot may write while it runs. It
    commits once, at its end: stopped earlier, it leaves the database empty."""
    from gateway.service import instance_lock
    from memory_core import migrate_data_dir

    def echo(line: str) -> None:
        click.echo(visible(line))

    try:
        with instance_lock(home):
            return migrate_data_dir(settings, url, echo=echo)
    except InstanceLockedError:
        raise InstanceLockedError(
            f"a running mnemo serves {home.resolve()}: stop it before moving its data"
        ) from None


@storage.command()
@click.option(
    "--sample",
    type=click.IntRange(1),
    default=None,
    help="On PostgreSQL, check the search words of this many random messages, not all.",
)
@click.pass_obj
def check(state: CliState, sample: int | None) -> None:
    """Verify the configured storage (SQLite and files, or PostgreSQL), changing nothing:
    one line per check and per store's digest; exit 1 on a problem."""
    from memory_core import check_data_dir

    config = run_command(state.config)
    settings = storage_settings(config)
    report = run_command(lambda: asyncio.run(check_data_dir(settings, sample=sample)))
    for line in report.passed:
        click.echo(visible(f"ok   {line}"))
    for name, digest in sorted(report.digests.items()):
        click.echo(f"ok   {name}: sha256 {digest[:16]}")
    for problem in report.problems:
        click.echo(visible(redact_url_credentials(f"FAIL {problem}")))
    if report.problems:
        count = len(report.problems)
        fail(f"{count} problem{'s' if count != 1 else ''} in the {_where(settings.url)}")
    click.echo(f"the {_where(settings.url)} is consistent")


def _where(url: str | None) -> str:
    return "SQLite data directory" if url is None else "PostgreSQL database"

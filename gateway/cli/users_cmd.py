"""`mnemo users …`: list the people the bot holds data about, export or erase one.

The same code as the chat commands: `gateway.commands.erase.person_data` over
the stores `open_services` opens, so ``mnemo users erase KEY`` removes exactly
what ``/forget all`` would (USER.md and its folder, private skills, sessions
with both indexes purged, exports, and the memory providers' data), and
``mnemo users export KEY`` writes the file ``/export`` would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from gateway.cli.access_cmd import allow, allowed, deny
from gateway.cli.base import CliState, fail, json_text, run_command, user_key_option, visible
from gateway.commands.choices import PendingChoices
from gateway.commands.erase import PendingErasures, person_data
from gateway.config import Config

if TYPE_CHECKING:
    from gateway.app import Services
from gateway.errors import InstanceLockedError
from memory_core import PersonData, PersonHoldings

T = TypeVar("T")


def _with_person(
    config: Config, body: Callable[[PersonData], Awaitable[T]], erasing: str | None = None
) -> T:
    """Run `body` with the person data of the bot's stores, opened for it and closed after;
    `erasing`: that person's background jobs go too (on PostgreSQL, every replica's)."""
    from gateway.app import open_services

    async def run() -> T:
        async with open_services(config) as services:
            person = person_data(
                services.memory,
                services.skills,
                services.sessions,
                services.new_manager,
                config.home,
            )
            result = await body(person)
            if erasing is not None:
                await _forget_waiting(services, erasing)
            return result

    return asyncio.run(run())


async def _forget_waiting(services: Services, user_key: str) -> None:
    """What the running bot keeps about `user_key` besides the stores: their background
    jobs, and (shared by replicas) the choices offered to them and a /forget all waiting
    for its confirmation, whose texts are theirs."""
    await services.jobs.forget_person(user_key)
    PendingChoices.over(services.documents).withdraw(user_key)
    PendingErasures.over(services.documents).take(user_key)


def _erase_alone(config: Config, user_key: str) -> PersonHoldings:
    """Erase `user_key` holding the data directory's lock, so that no running bot can
    write the person back meanwhile (a turn or review of theirs in flight) and none
    starts; `InstanceLockedError` when a `mnemo run` serves the directory."""
    from gateway.service import instance_lock

    try:
        with instance_lock(config.home):
            return _with_person(config, lambda p: p.erase(user_key), erasing=user_key)
    except InstanceLockedError:
        raise InstanceLockedError(
            f"a running mnemo serves {config.home.resolve()} and could write {user_key}'s "
            "data back; ask them to send /forget all in chat, or stop it and erase again"
        ) from None


@click.group()
def users() -> None:
    """List the people the bot holds data about; export or erase one; allow or deny one."""


@users.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.pass_obj
def list_(state: CliState, as_json: bool) -> None:
    """Every person with memory, skills or sessions, and how much of each."""

    async def body(person: PersonData) -> list[PersonHoldings]:
        keys = set(person.known_user_keys()) | set(await person.session_user_keys())
        return [await person.holdings(key) for key in sorted(keys)]

    people = run_command(lambda: _with_person(state.config(), body))
    if as_json:
        click.echo(json_text([_holdings_json(held) for held in people], indent=2))
        return
    if not people:
        click.echo("no data about anyone yet")
    for held in people:
        click.echo(visible(f"{held.user_key}: {held.summary()}"))


def _holdings_json(held: PersonHoldings) -> dict[str, object]:
    return {
        "user_key": held.user_key,
        "entries": held.entries,
        "sessions": held.sessions,
        "messages": held.messages,
        "skills": held.skills,
    }


@users.command()
@click.argument("user_key", callback=user_key_option)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="File to write (default: <home>/exports/<key>/<key>-<time>.jsonl).",
)
@click.pass_obj
def export(state: CliState, user_key: str, output: Path | None) -> None:
    """Write USER_KEY's memory entries and sessions to one JSON Lines file (mode 0600)."""

    async def body(person: PersonData) -> tuple[Path, int, int]:
        path = output if output is not None else person.export_path(user_key, time.time())
        result = await person.export(user_key, path)
        return result.path, result.entries, result.messages

    path, entries, messages = run_command(lambda: _with_person(state.config(), body))
    click.echo(visible(f"exported {entries} memory entries and {messages:,} messages to {path}"))


@users.command()
@click.argument("user_key", callback=user_key_option)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def erase(state: CliState, user_key: str, yes: bool) -> None:
    """Erase everything held about USER_KEY (what /forget all erases)."""
    config = state.config()
    if not yes:
        held = run_command(lambda: _with_person(config, lambda p: p.holdings(user_key)))
        click.confirm(
            visible(f"Erase {held.summary()} of {user_key}? This cannot be undone"), abort=True
        )
    erased = run_command(lambda: _erase_alone(config, user_key))
    click.echo(visible(f"erased {erased.summary()} of {user_key}"))
    if erased.provider_failures:
        fail("memory provider could not erase: " + "; ".join(erased.provider_failures))


users.add_command(allow)  # allow, deny and allowed: gateway.cli.access_cmd
users.add_command(deny)
users.add_command(allowed)

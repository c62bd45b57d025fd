"""`mnemo users allow|deny|allowed`: who may talk to the bot, changed without a restart.

They work on the storage's list (`gateway.pairing.AccessList`: ``<home>/access.json``,
or with ``storage.url`` the row every replica reads), which a running ``mnemo run``
reads again when it changes: ``allow CODE`` lets in the person the bot gave that pairing code to,
``allow telegram:ID`` anyone by id, ``deny telegram:ID`` takes off the list
what it added. The configuration's `allowed_users` and `admins` are served
too and only their file changes them: ``deny`` says so for such a person.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from gateway.access import AccessPolicy
from gateway.cli.base import CliState, fail, json_text, run_command, visible
from gateway.config import Config, storage_settings
from gateway.errors import AccessListError
from gateway.pairing import ACCESS_FILE, AccessList, Grant, parse_grant
from memory_core import open_document

T = TypeVar("T")


def _on_list(config: Config, work: Callable[[AccessList], T]) -> T:
    """`work` on the storage's list (opened for it alone, closed after); our errors in
    one line."""

    def body() -> T:
        with open_document(storage_settings(config), ACCESS_FILE) as document:
            return work(AccessList(document))

    return run_command(body)


def _looks_like_person(text: str) -> bool:
    return ":" in text or text.lower().startswith(("telegram-", "discord-"))


def _grant(text: str) -> Grant:
    try:
        return parse_grant(text)
    except AccessListError as exc:
        fail(str(exc), 2)
    raise AssertionError("unreachable")


@click.command()
@click.argument("code_or_id")
@click.pass_obj
def allow(state: CliState, code_or_id: str) -> None:
    """Let in the person given pairing code CODE_OR_ID, or the person telegram:ID / discord:ID.

    A running bot answers their next message; no restart."""
    config = state.config()
    if not _looks_like_person(code_or_id):
        grant = _on_list(config, lambda access: access.redeem(code_or_id))
        click.echo(visible(f"let in {grant} (their pairing code is used up)"))
        return
    grant = _grant(code_or_id)
    added = _on_list(config, lambda access: access.allow(grant))
    note = "" if added else " (already on the list)"
    click.echo(visible(f"let in {grant}{note}"))


@click.command()
@click.argument("person")
@click.pass_obj
def deny(state: CliState, person: str) -> None:
    """Take PERSON (telegram:ID or discord:ID) off the data directory's list."""
    config = state.config()
    grant = _grant(person)
    removed = _on_list(config, lambda access: access.deny(grant))
    still = _still_served(config, grant)
    if not removed:
        reason = still or "they are not on the data directory's list"
        fail(f"{grant} was not removed: {reason}")
    if still:
        click.echo(visible(f"removed {grant} from the data directory's list, but {still}"))
    else:
        click.echo(visible(f"removed {grant}: their next message is refused"))


def _still_served(config: Config, grant: Grant) -> str | None:
    """Why the configuration still serves `grant` (None: it does not)."""
    policy = AccessPolicy.from_config(config)
    key = f"{grant.platform}.allowed_users"
    if policy.is_admin(grant.platform, grant.user_id):
        return "they are in the config's admins (edit the config file and restart)"
    if policy.configured(grant.platform, grant.user_id):
        return f"the config's {key} serves them (edit the config file and restart)"
    return None


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.pass_obj
def allowed(state: CliState, as_json: bool) -> None:
    """Who is served: the config's allowed_users and admins, and the data directory's list."""
    config = state.config()
    rows = [
        *({"person": a, "source": "admins"} for a in config.admins),
        *(
            {"person": f"{platform}:{uid}", "source": f"{platform}.allowed_users"}
            for platform, ids in (
                ("telegram", config.telegram.allowed_users),
                ("discord", config.discord.allowed_users),
            )
            for uid in ids
        ),
        *(
            {"person": f"{g.platform}:{g.user_id}", "source": ACCESS_FILE}
            for g in _on_list(config, AccessList.entries)
        ),
    ]
    if as_json:
        click.echo(json_text(rows, indent=2))
        return
    if not rows:
        click.echo("nobody is served but the console")
    for row in rows:
        click.echo(visible(f"{row['person']}  ({row['source']})"))

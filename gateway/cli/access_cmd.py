"""`mnemo users allow|deny|allowed`: who may talk to the bot, changed without a restart.

They work on the data directory's list (`gateway.pairing.AccessList`,
``<home>/access.json``), which a running ``mnemo run`` reads again when it
changes: ``allow CODE`` lets in the person the bot gave that pairing code to,
``allow telegram:ID`` anyone by id, ``deny telegram:ID`` takes off the list
what it added. The configuration's `allowed_users` and `admins` are served
too and only their file changes them: ``deny`` says so for such a person.
"""

from __future__ import annotations

import click

from gateway.access import AccessPolicy
from gateway.cli.base import CliState, fail, json_text, run_command, visible
from gateway.config import Config
from gateway.errors import AccessListError
from gateway.pairing import ACCESS_FILE, AccessList, Grant, parse_grant


def _list(config: Config) -> AccessList:
    return AccessList(config.home / ACCESS_FILE)


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
    access = _list(config)
    if not _looks_like_person(code_or_id):
        grant = run_command(lambda: access.redeem(code_or_id))
        click.echo(visible(f"let in {grant} (their pairing code is used up)"))
        return
    grant = _grant(code_or_id)
    added = run_command(lambda: access.allow(grant))
    note = "" if added else " (already on the list)"
    click.echo(visible(f"let in {grant}{note}"))


@click.command()
@click.argument("person")
@click.pass_obj
def deny(state: CliState, person: str) -> None:
    """Take PERSON (telegram:ID or discord:ID) off the data directory's list."""
    config = state.config()
    grant = _grant(person)
    removed = run_command(lambda: _list(config).deny(grant))
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
            for g in run_command(_list(config).entries)
        ),
    ]
    if as_json:
        click.echo(json_text(rows, indent=2))
        return
    if not rows:
        click.echo("nobody is served but the console")
    for row in rows:
        click.echo(visible(f"{row['person']}  ({row['source']})"))

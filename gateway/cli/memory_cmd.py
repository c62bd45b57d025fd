"""`mnemo memory …`: the operator's view of memory (USER.md and MEMORY.md entries).

Every command goes through `MemoryTool.execute`, the same path as the model's
`memory` tool, bound to the chosen user (`--user telegram-12345`, the key as
stored) or to the shared notes (`--shared`). The operator counts as an admin.
A refusal prints one line (with the pattern id for a safety refusal) and exits
non-zero. `history` and `undo` work on a profile (`--user KEY`) or, without
it, on the shared MEMORY.md: its history is the audit of who changed it. The
store is the configured one (files under home, or PostgreSQL), opened per command.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from gateway.cli.base import CliState, json_text, run_command, visible
from gateway.cli.stores import open_stores
from memory_core import check_user_key
from memory_core.file_memory import (
    OPERATOR,
    LedgerChange,
    MemoryBackend,
    MemoryRequest,
    MemoryState,
    MemoryTool,
    Operation,
    Target,
)

FC = TypeVar("FC", bound=Callable[..., Any])


def _scope_options(command: FC) -> FC:
    command = click.option("--shared", is_flag=True, help="The shared notes (MEMORY.md).")(command)
    return click.option(
        "--user", "user_key", metavar="KEY", help="A user's profile, e.g. telegram-12345."
    )(command)


def _target(user_key: str | None, shared: bool) -> Target:
    if (user_key is None) == (not shared):
        raise click.UsageError("give exactly one of --user KEY or --shared")
    return "memory" if shared else "user"


@contextmanager
def _store(state: CliState) -> Iterator[MemoryBackend]:
    with open_stores(state.config()) as stores:
        yield stores.storage.memory


def _write(state: CliState, user_key: str | None, shared: bool, operation: Operation) -> None:
    target = _target(user_key, shared)

    def body() -> None:
        key = check_user_key(user_key) if user_key is not None else None
        with _store(state) as store:
            tool = MemoryTool(store, key, is_admin=True, origin=OPERATOR)
            result = tool.execute(MemoryRequest(target, (operation,)))
        count = len(result.state.entries)
        entries = "entry" if count == 1 else "entries"
        click.echo(visible(f"{result.notes[0]} · {result.state.usage_label}, {count} {entries}"))
        if result.archived:
            moved = len(result.archived)
            click.echo(
                f"moved {moved} older {'entry' if moved == 1 else 'entries'} to the archive "
                "to make room (mnemo memory history shows it, mnemo memory undo reverts it)"
            )

    run_command(body)


@click.group()
def memory() -> None:
    """Show and edit file memory (shared notes and user profiles)."""


@memory.command()
@_scope_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_obj
def show(state: CliState, user_key: str | None, shared: bool, as_json: bool) -> None:
    """Show the entries of a user's profile or of the shared notes."""
    target = _target(user_key, shared)

    def body() -> MemoryState:
        key = check_user_key(user_key) if user_key is not None else None
        with _store(state) as store:
            return store.read(target, key)

    current = run_command(body)
    if as_json:
        payload = {
            "target": target,
            "entries": list(current.entries),
            "chars": current.chars,
            "limit": current.limit,
        }
        click.echo(json_text(payload))
        return
    title = "shared notes" if shared else f"profile of {user_key}"
    click.echo(f"{title} [{current.usage_label}]")
    if not current.entries:
        click.echo("(no entries)")
    for number, entry in enumerate(current.entries, start=1):
        click.echo(f"{number:>3}. " + visible(entry, keep="\n\t").replace("\n", "\n     "))


@memory.command()
@_scope_options
@click.argument("text")
@click.pass_obj
def add(state: CliState, user_key: str | None, shared: bool, text: str) -> None:
    """Add TEXT as a new entry."""
    _write(state, user_key, shared, Operation("add", content=text))


@memory.command()
@_scope_options
@click.argument("old_text")
@click.argument("new_text")
@click.pass_obj
def replace(
    state: CliState, user_key: str | None, shared: bool, old_text: str, new_text: str
) -> None:
    """Replace the entry containing OLD_TEXT with NEW_TEXT."""
    _write(state, user_key, shared, Operation("replace", content=new_text, old_text=old_text))


@memory.command()
@_scope_options
@click.argument("old_text")
@click.pass_obj
def remove(state: CliState, user_key: str | None, shared: bool, old_text: str) -> None:
    """Remove the entry containing OLD_TEXT."""
    _write(state, user_key, shared, Operation("remove", old_text=old_text))


@memory.command()
@click.option("--user", "user_key", metavar="KEY", help="A user's profile (default: MEMORY.md).")
@click.option("--limit", default=50, show_default=True, help="How many changes to show.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of text.")
@click.pass_obj
def history(state: CliState, user_key: str | None, limit: int, as_json: bool) -> None:
    """List the recorded changes of a profile, or of the shared notes (the audit), newest first."""
    target: Target = "user" if user_key is not None else "memory"

    def body() -> tuple[LedgerChange, ...]:
        key = check_user_key(user_key) if user_key is not None else None
        with _store(state) as store:
            return store.history(target, key, limit)

    changes = run_command(body)
    if as_json:
        click.echo(json_text([change.as_json() for change in changes], indent=2))
        return
    if not changes:
        click.echo("(no recorded changes)")
    for change in changes:
        stamp = datetime.fromtimestamp(change.at, UTC).strftime("%Y-%m-%d %H:%M")
        by = change.origin.kind + (f" {change.origin.by}" if change.origin.by else "")
        if change.origin.session_id is not None:
            by += f", session {change.origin.session_id}"
        undoes = f" of #{change.undoes}" if change.undoes is not None else ""
        click.echo(f"#{change.id} {stamp} {change.action}{undoes} by {by}")
        for sign, text in (("-", change.before), ("+", change.after)):
            if text is not None:
                click.echo(f"    {sign} " + visible(text, keep="\n\t").replace("\n", "\n      "))


@memory.command()
@click.argument("change_id", metavar="[N]", required=False, type=int)
@click.option("--user", "user_key", metavar="KEY", help="A user's profile (default: MEMORY.md).")
@click.pass_obj
def undo(state: CliState, change_id: int | None, user_key: str | None) -> None:
    """Revert the latest change still in force, or change N, as the operator."""
    target: Target = "user" if user_key is not None else "memory"

    def body() -> None:
        key = check_user_key(user_key) if user_key is not None else None
        with _store(state) as store:
            result = store.undo(target, key, change_id, OPERATOR)
        made = ", ".join(f"#{c.id}" for c in result.made)
        click.echo(f"undid #{result.undone.id} ({result.undone.action}) as {made}")

    run_command(body)

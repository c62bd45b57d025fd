"""The `mnemo` command line.

Each command group lives in its own module and is registered here. Commands
load the configuration lazily, so `--help` works even with a broken file, and
turn `GatewayError` / `MemoryCoreError` into one line on stderr and a non-zero
exit instead of a traceback.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from gateway import __version__
from gateway.cli.base import CliState, run_command, visible

_GROUPS = {
    "jobs": ("gateway.cli.jobs", "jobs"),
    "memory": ("gateway.cli.memory_cmd", "memory"),
    "sessions": ("gateway.cli.sessions_cmd", "sessions"),
    "skills": ("gateway.cli.skills_cmd", "skills"),
    "storage": ("gateway.cli.storage_cmd", "storage"),
    "users": ("gateway.cli.users_cmd", "users"),
}


class _LazyGroup(click.Group):
    """The `mnemo` group: each command group's module is imported when it runs (or when
    --help lists it), so `mnemo --version` and each command load only what they use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_GROUPS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = _GROUPS.get(cmd_name)
        if found is None:
            return super().get_command(ctx, cmd_name)
        module, name = found
        command: click.Command = getattr(importlib.import_module(module), name)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mnemo")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    envvar="MNEMO_CONFIG",
    help="YAML configuration file (default: $MNEMO_CONFIG, else ./mnemo.yaml if present).",
)
@click.pass_context
def main(ctx: click.Context, config_path: Path | None) -> None:
    """Mnemo: a chat bot for Telegram and Discord that remembers each person."""
    ctx.obj = CliState(config_path=config_path)


@main.command()
@click.option(
    "--console", is_flag=True, help="Serve this terminal too (even when stdin is not one)."
)
@click.pass_obj
def run(state: CliState, console: bool) -> None:
    """Start every configured adapter (the console when no platform token is set and
    stdin is a terminal)."""
    from gateway.preflight import check_startup, default_skills_folder

    made = run_command(lambda: default_skills_folder(state.config()))
    if made is not None:
        click.echo(f"mnemo: {made}", err=True)
    run_command(lambda: check_startup(state.config()))  # a mistake: one line, in a blink
    from gateway.service import run_bot  # seconds of imports (the model client)

    run_command(lambda: run_bot(state.config(), console=console))


@main.command()
@click.pass_obj
def chat(state: CliState) -> None:
    """Talk to the bot in this terminal."""
    from gateway.service import run_console

    run_command(lambda: run_console(state.config()))


@main.command()
@click.option("--timeout", default=3.0, show_default=True, help="Seconds to wait for each service.")
@click.option(
    "--no-spend", is_flag=True, help="Ask the model endpoint for its model list, not a token."
)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as a JSON list.")
@click.pass_obj
def doctor(state: CliState, timeout: float, no_spend: bool, as_json: bool) -> None:
    """Check what turns need: config, data dir, skills, SQLite, models, Telegram, Discord."""
    from gateway.cli.base import json_text
    from gateway.doctor import run_doctor
    from gateway.preflight import default_skills_folder

    made = run_command(lambda: default_skills_folder(state.config()))
    if made is not None and not as_json:
        click.echo(f"mnemo: {made}", err=True)

    def echo(line: str) -> None:
        click.echo(line if as_json else visible(line))

    ok = run_command(
        lambda: run_doctor(
            state.config(),
            timeout=timeout,
            echo=echo,
            spend=not no_spend,
            as_json=(lambda checks: json_text(checks, indent=2)) if as_json else None,
        )
    )
    if not ok:
        raise SystemExit(1)

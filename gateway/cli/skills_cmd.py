"""`mnemo skills …` commands: list, show and check the skills folder.

The folder is `skills.dir` from the configuration; the authorship manifest is
``<home>/skills-manifest.json`` (in the data directory, so the operator's
folder holds only skills).
"""

from __future__ import annotations

import click

from gateway.cli.base import CliState, fail, run_command, visible
from memory_core.skills import GENERAL, SkillNotFoundError, SkillProblem, SkillsStore

MANIFEST_NAME = "skills-manifest.json"
ARCHIVE_NAME = "skills-archive"
_DESCRIPTION_WIDTH = 72


def open_store(state: CliState, problems: list[SkillProblem] | None = None) -> SkillsStore:
    """The store for the configured folder; problems go to `problems` when given."""
    config = state.config()
    return SkillsStore(
        config.skills.dir,
        config.home / MANIFEST_NAME,
        archive_dir=config.home / ARCHIVE_NAME,
        on_problem=problems.append if problems is not None else None,
    )


@click.group()
def skills() -> None:
    """List, show and check skills (SKILL.md folders)."""


@skills.command("list")
@click.pass_obj
def list_skills(state: CliState) -> None:
    """List every valid skill: name, category, owner and description."""

    def body() -> None:
        skipped: list[SkillProblem] = []
        store = open_store(state, skipped)
        found = store.skills()
        if not found:
            click.echo(f"No skills in {store.skills_dir}.")
        else:
            table = [("NAME", "CATEGORY", "OWNER", "DESCRIPTION")]
            table += [
                (s.name, s.category or GENERAL, s.owner, _one_line(s.description)) for s in found
            ]
            widths = [max(len(row[i]) for row in table) for i in range(3)]
            for row in table:
                cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
                click.echo(visible("  ".join(cells) + "  " + row[3]))
        if skipped:
            click.echo(
                f"{len(skipped)} problem(s) found; run `mnemo skills check` for details.", err=True
            )

    run_command(body)


@skills.command("show")
@click.argument("name")
@click.pass_obj
def show_skill(state: CliState, name: str) -> None:
    """Print one skill's SKILL.md, with its owner and support files."""

    def body() -> None:
        skipped: list[SkillProblem] = []
        store = open_store(state, skipped)
        try:
            skill = store.get(name)
        except SkillNotFoundError:
            broken = [p for p in skipped if p.path.parent.name == name]
            if broken:
                fail(f"skill {name!r} is invalid: {broken[0].message}")
            raise
        click.echo(visible(f"# {skill.folder / 'SKILL.md'}"))
        click.echo(visible(f"# category: {skill.category or GENERAL} · owner: {skill.owner}"))
        files = store.support_files(name)
        if files:
            click.echo(visible(f"# files: {', '.join(files)}"))
        click.echo("")
        click.echo(visible(store.read_text(name).rstrip("\n"), keep="\n\t"))

    run_command(body)


@skills.command("check")
@click.pass_obj
def check_skills(state: CliState) -> None:
    """Validate every skill in the folder; exit non-zero listing each problem."""

    def body() -> None:
        reported: list[SkillProblem] = []  # collected rather than logged: printed below
        store = open_store(state, reported)
        if not store.skills_dir.is_dir():
            fail(f"skills directory {store.skills_dir} does not exist")
        count = len(store.skills())
        problems = store.problems()
        for problem in problems:
            click.echo(visible(str(problem)))
        if problems:
            n = len(problems)
            fail(f"{n} problem{'s' if n != 1 else ''} in {store.skills_dir}")
        click.echo(f"OK: {count} skill{'s' if count != 1 else ''} valid in {store.skills_dir}")

    run_command(body)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) <= _DESCRIPTION_WIDTH:
        return flat
    return flat[: _DESCRIPTION_WIDTH - 1].rstrip() + "…"

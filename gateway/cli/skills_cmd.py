"""`mnemo skills …` commands: list, show, check and promote skills.

The shared folder is `skills.dir` from the configuration. Everything else is
in the configured storage, so the operator's folder holds only shared skills:
the manifest, each person's own skills and deleted skills are, on SQLite, the
data directory's ``skills-manifest.json``, ``skills-private/<user key>/`` and
``skills-archive``, or tables of the PostgreSQL database.
`list`, `show` and `check` cover every person's skills too (the OWNER column:
``operator``, ``unowned``, or the person's user key); `promote` shares one
with everyone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from gateway.cli.base import CliState, fail, json_text, run_command, visible
from gateway.cli.stores import open_stores
from memory_core.skills import GENERAL, Skill, SkillNotFoundError, SkillProblem, SkillsStore

_DESCRIPTION_WIDTH = 72
_USER_HELP = "The user key of the person whose skill it is (see `mnemo skills list`)."


@contextmanager
def open_store(
    state: CliState, problems: list[SkillProblem] | None = None
) -> Iterator[SkillsStore]:
    """The configured skills, open for the block; problems go to `problems` when given."""
    with open_stores(state.config()) as stores:
        opened = stores.storage.skills
        yield SkillsStore(  # the same folders and private skills, telling problems to us
            opened.skills_dir,
            opened.manifest_path,
            private_dir=opened.private_dir,
            archive_dir=opened.archive_dir,
            on_problem=problems.append if problems is not None else None,
            fence=opened.fence,
            private=opened.private,
        )


def owner_label(skill: Skill) -> str:
    """``operator``, ``unowned``, or the user key of the person it belongs to."""
    return skill.user_key or skill.owner


@click.group()
def skills() -> None:
    """List, show, check and promote skills (SKILL.md folders)."""


@skills.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.pass_obj
def list_skills(state: CliState, as_json: bool) -> None:
    """List every valid skill, shared and each person's: name, category, owner, description."""

    def body() -> None:
        skipped: list[SkillProblem] = []
        with open_store(state, skipped) as store:
            found = store.every_skill()
            if as_json:
                click.echo(json_text([_skill_json(s) for s in found], indent=2))
            elif not found:
                click.echo(f"No skills in {store.skills_dir}.")
            else:
                table = [("NAME", "CATEGORY", "OWNER", "DESCRIPTION")]
                table += [
                    (s.name, s.category or GENERAL, owner_label(s), _one_line(s.description))
                    for s in found
                ]
                widths = [max(len(row[i]) for row in table) for i in range(3)]
                for row in table:
                    cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
                    click.echo(visible("  ".join(cells) + "  " + row[3]))
            if skipped:
                click.echo(
                    f"{len(skipped)} problem(s) found; run `mnemo skills check` for details.",
                    err=True,
                )

    run_command(body)


def _skill_json(skill: Skill) -> dict[str, object]:
    return {
        "name": skill.name,
        "category": skill.category or GENERAL,
        "owner": skill.owner,
        "user_key": skill.user_key,
        "description": skill.description,
        "folder": str(skill.folder),
    }


@skills.command("show")
@click.argument("name")
@click.option("--user", "user_key", default=None, help=_USER_HELP)
@click.pass_obj
def show_skill(state: CliState, name: str, user_key: str | None) -> None:
    """Print one skill's SKILL.md, with its owner and support files."""

    def body() -> None:
        skipped: list[SkillProblem] = []
        with open_store(state, skipped) as store:
            skill = _pick(store, name, user_key, skipped)
            click.echo(visible(f"# {skill.folder / 'SKILL.md'}"))
            click.echo(
                visible(f"# category: {skill.category or GENERAL} · owner: {owner_label(skill)}")
            )
            files = store.files_of(skill)
            if files:
                click.echo(visible(f"# files: {', '.join(files)}"))
            click.echo("")
            click.echo(visible(store.text_of(skill).rstrip("\n"), keep="\n\t"))

    run_command(body)


@skills.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print the problems as JSON.")
@click.pass_obj
def check_skills(state: CliState, as_json: bool) -> None:
    """Validate every skill (shared and each person's); exit non-zero listing each problem."""

    def body() -> None:
        reported: list[SkillProblem] = []  # collected rather than logged: printed below
        with open_store(state, reported) as store:
            if not store.skills_dir.is_dir():
                fail(f"skills directory {store.skills_dir} does not exist")
            count = len(store.every_skill())
            problems = store.problems()
            if as_json:
                listed = [{"path": str(p.path), "message": p.message} for p in problems]
                payload = {"dir": str(store.skills_dir), "valid": count, "problems": listed}
                click.echo(json_text(payload, indent=2))
            else:
                for problem in problems:
                    click.echo(visible(str(problem)))
            if problems:
                n = len(problems)
                fail(f"{n} problem{'s' if n != 1 else ''} in {store.skills_dir}")
            if not as_json:
                click.echo(
                    f"OK: {count} skill{'s' if count != 1 else ''} valid in {store.skills_dir}"
                )

    run_command(body)


@skills.command("promote")
@click.argument("name")
@click.option("--user", "user_key", default=None, help=_USER_HELP)
@click.pass_obj
def promote_skill(state: CliState, name: str, user_key: str | None) -> None:
    """Share a person's skill with everyone: it moves into the shared folder and
    becomes the operator's, read-only to the model. Give --user when several
    people have a skill of that name."""

    def body() -> None:
        with open_store(state) as store:
            owner = user_key if user_key is not None else store.promotion_owner(name)
            skill = store.promote(name, owner)
            source = f"from {owner}" if owner is not None else "unowned"
            click.echo(
                f"Promoted {skill.name!r} ({source}) to {skill.folder}: shared with everyone, "
                "read-only to the model."
            )

    run_command(body)


def _pick(
    store: SkillsStore, name: str, user_key: str | None, skipped: list[SkillProblem]
) -> Skill:
    """The skill `show` means: the person's with --user, else the shared one, else
    the only person's skill of that name."""
    named = [s for s in store.every_skill() if s.name == name]
    if user_key is not None:
        named = [s for s in named if s.user_key == user_key]
    else:
        named = [s for s in named if s.user_key is None] or named
    if len(named) > 1:
        owners = ", ".join(owner_label(s) for s in named)
        fail(f"{len(named)} people have a skill named {name!r} ({owners}); pass --user KEY")
    if not named:
        broken = [p for p in skipped if p.path.parent.name == name]
        if broken:
            fail(f"skill {name!r} is invalid: {broken[0].message}")
        whose = f" for {user_key}" if user_key is not None else ""
        raise SkillNotFoundError(f"no skill named {name!r}{whose}")
    return named[0]


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) <= _DESCRIPTION_WIDTH:
        return flat
    return flat[: _DESCRIPTION_WIDTH - 1].rstrip() + "…"

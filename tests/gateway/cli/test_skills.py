"""`mnemo skills list | show | check | promote` against real folders, and the bundled skills."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway.cli import main
from memory_core.skills.store import SkillsStore
from tests.timing import scaled

REPO = Path(__file__).resolve().parents[3]
ADA = "telegram-1"
BOB = "telegram-2"
MNEMO = Path(sys.executable).parent / "mnemo"


def skill_md(name: str, description: str = "Does a thing.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n1. Step.\n"


def put(root: Path, name: str, category: str | None = None, text: str | None = None) -> Path:
    folder = root / category / name if category else root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_md(name) if text is None else text)
    return folder


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def mnemo(skills_dir: Path, home: Path, *args: str) -> Result:
    config = home.parent / "mnemo.yaml"
    config.write_text(f"home: {home}\nskills:\n  dir: {skills_dir}\n")
    return CliRunner().invoke(
        main, ["--config", str(config), "skills", *args], env={"MNEMO_HOME": ""}
    )


def test_list_shows_name_category_owner_description(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "skills"
    put(root, "alpha")
    put(root, "deploy", "ops", skill_md("deploy", "Checks before a deploy. " * 10))
    store = SkillsStore(root, home / "skills-manifest.json")
    store.create("bot-notes", skill_md("bot-notes", "Written by the bot."), user_key=ADA)
    result = mnemo(root, home, "list")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "CATEGORY", "OWNER", "DESCRIPTION"]
    assert lines[1].split()[:3] == ["alpha", "general", "operator"]
    assert lines[2].split() == ["bot-notes", "general", ADA, "Written", "by", "the", "bot."]
    assert lines[3].split()[:3] == ["deploy", "ops", "operator"] and lines[3].endswith("…")
    assert result.stderr == ""


def test_list_mentions_skipped_skills_and_empty_folders(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "skills"
    put(root, "broken", text="no front matter")
    result = mnemo(root, home, "list")
    assert result.exit_code == 0
    assert result.stdout == f"No skills in {root}.\n"
    assert "1 problem(s) found; run `mnemo skills check`" in result.stderr


def test_show_prints_the_skill(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "skills"
    folder = put(root, "alpha", "misc")
    (folder / "references").mkdir()
    (folder / "references" / "more.md").write_text("more")
    result = mnemo(root, home, "show", "alpha")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        f"# {folder / 'SKILL.md'}\n"
        "# category: misc · owner: operator\n"
        "# files: references/more.md\n"
        "\n" + skill_md("alpha")
    )


def test_show_unknown_or_invalid_skill_fails(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "skills"
    put(root, "bad", text="---\nname: bad\n---\nbody\n")
    missing = mnemo(root, home, "show", "ghost")
    assert missing.exit_code == 1 and missing.stderr == "mnemo: no skill named 'ghost'\n"
    invalid = mnemo(root, home, "show", "bad")
    assert invalid.exit_code == 1
    assert invalid.stderr == "mnemo: skill 'bad' is invalid: description is missing\n"


def test_check_lists_each_problem_on_one_line(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "skills"
    put(root, "good")
    put(root, "no-desc", text="---\nname: no-desc\n---\nbody\n")
    put(root, "wrong", "cat", skill_md("other"))
    put(root, "empty", text="---\nname: empty\ndescription: d\n---\n\n")
    result = mnemo(root, home, "check")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"{root / 'cat' / 'wrong' / 'SKILL.md'}: name 'other' does not match its folder name "
        "'wrong'",
        f"{root / 'empty' / 'SKILL.md'}: the Markdown body after the front matter is empty",
        f"{root / 'no-desc' / 'SKILL.md'}: description is missing",
    ]
    assert result.stderr == f"mnemo: 3 problems in {root}\n"  # not logged a second time


def test_check_passes_and_counts(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "skills"
    put(root, "one")
    result = mnemo(root, home, "check")
    assert (result.exit_code, result.stdout) == (0, f"OK: 1 skill valid in {root}\n")


def test_check_on_a_missing_folder_fails(tmp_path: Path, home: Path) -> None:
    result = mnemo(tmp_path / "nowhere", home, "check")
    assert result.exit_code == 1
    assert result.stderr == f"mnemo: skills directory {tmp_path / 'nowhere'} does not exist\n"


def test_bundled_skills_pass_check_with_the_installed_command(tmp_path: Path) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_text(f"home: {tmp_path / 'home'}\nskills:\n  dir: {REPO / 'skills'}\n")
    proc = subprocess.run(
        [str(MNEMO), "--config", str(config), "skills", "check"],
        cwd=tmp_path,
        env={"PATH": str(MNEMO.parent)},
        capture_output=True,
        text=True,
        timeout=scaled(30),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OK: ") and proc.stderr == ""
    count = int(proc.stdout.split()[1])
    assert 2 <= count <= 3


# ------------------------------------------------------------------- promote


def test_promote_shares_a_persons_skill(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "skills"
    put(root, "alpha")
    store = SkillsStore(root, home / "skills-manifest.json")
    store.create("deploy", skill_md("deploy", "Ada's deploy."), category="ops", user_key=ADA)
    assert store.skills(BOB) == store.skills()  # not shared yet
    shown = mnemo(root, home, "show", "deploy")
    assert shown.exit_code == 0 and f"owner: {ADA}" in shown.stdout
    result = mnemo(root, home, "promote", "deploy")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        f"Promoted 'deploy' (from {ADA}) to {root / 'ops' / 'deploy'}: shared with everyone, "
        "read-only to the model.\n"
    )
    assert "Ada's deploy." in store.index_block(BOB)
    listed = mnemo(root, home, "list").stdout.splitlines()
    assert listed[2].split()[:3] == ["deploy", "ops", "operator"]
    again = mnemo(root, home, "promote", "deploy")
    assert again.exit_code == 1 and "nobody has a skill named 'deploy'" in again.stderr


def test_promote_needs_user_when_several_people_have_the_name(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "skills"
    root.mkdir()
    store = SkillsStore(root, home / "skills-manifest.json")
    store.create("deploy", skill_md("deploy", "Ada's."), user_key=ADA)
    store.create("deploy", skill_md("deploy", "Bob's."), user_key=BOB)
    shown = mnemo(root, home, "show", "deploy")
    assert shown.exit_code == 1
    assert shown.stderr == (
        f"mnemo: 2 people have a skill named 'deploy' ({ADA}, {BOB}); pass --user KEY\n"
    )
    assert "Bob's." in mnemo(root, home, "show", "deploy", "--user", BOB).stdout
    ambiguous = mnemo(root, home, "promote", "deploy")
    assert ambiguous.exit_code == 1 and f"({ADA}, {BOB}); say whose" in ambiguous.stderr
    assert not (root / "deploy").exists()
    chosen = mnemo(root, home, "promote", "deploy", "--user", BOB)
    assert chosen.exit_code == 0, chosen.stderr
    assert "Bob's." in (root / "deploy" / "SKILL.md").read_text()
    bad = mnemo(root, home, "promote", "deploy", "--user", "../../etc")
    assert bad.exit_code == 1 and "invalid user key" in bad.stderr


def test_check_covers_each_persons_skills(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "skills"
    put(root, "one")
    put(home / "skills-private" / ADA, "broken", text="no front matter")
    (home / "skills-private" / "not a key").mkdir()
    result = mnemo(root, home, "check")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"{home / 'skills-private' / 'not a key'}: not a user key; ignored",
        f"{home / 'skills-private' / ADA / 'broken' / 'SKILL.md'}: missing YAML front matter: "
        "the file must start with a line '---'",
    ]

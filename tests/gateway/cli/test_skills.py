"""`mnemo skills list | show | check` against real folders, and the bundled skills."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway.cli import main
from memory_core.skills.store import SkillsStore

REPO = Path(__file__).resolve().parents[3]
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
    store.create("bot-notes", skill_md("bot-notes", "Written by the bot."))
    result = mnemo(root, home, "list")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "CATEGORY", "OWNER", "DESCRIPTION"]
    assert lines[1].split()[:3] == ["alpha", "general", "operator"]
    assert lines[2].split() == ["bot-notes", "general", "bot", "Written", "by", "the", "bot."]
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
        timeout=30,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OK: ") and proc.stderr == ""
    count = int(proc.stdout.split()[1])
    assert 2 <= count <= 3

"""Every set-up mistake stops `mnemo run` with one line and exit 2, before anything is
created; a config file's relative paths are relative to the file, wherever `mnemo run`
starts. One mistake is shown by a real `mnemo` subprocess (that the installed command
prints one line and exits 2, no traceback); the others run the same command in this
process (click's runner: the same code from the command line on, without the seconds of
an interpreter's start each); the runs that serve are real processes with the fake model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import main
from gateway.config import load_config
from gateway.errors import ConfigError
from gateway.preflight import (
    check_startup,
    default_skills_folder,
    model_setup_note,
    startup_problems,
)
from tests.fakes.base import serving_in_thread
from tests.fakes.openai import FakeOpenAI
from tests.timing import scaled

MNEMO = Path(sys.executable).parent / "mnemo"
ROOT = Path(__file__).resolve().parents[2]
_OURS = ("TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "TELEGRAM_WEBHOOK_SECRET", "OPENAI_BASE_URL")
_OURS += ("MNEMO_CONFIG", "MNEMO_HOME", "MNEMO_SKILLS_DIR", "OPENAI_API_KEY")
SKILL = """---
name: greeting-in-french
description: Greet the person in French when they ask for a French greeting.
tags: [greeting]
version: "1.0"
---
# Greeting in French

Say "Bonjour" and the person's name.
"""


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _OURS}
    return {**env, "USER": "ada", "LOGNAME": "ada", **extra}


def mnemo_run(config: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`mnemo --config CONFIG run` started in `cwd`: a real process."""
    return subprocess.run(
        [str(MNEMO), "--config", str(config), "run"], stdin=subprocess.DEVNULL,
        capture_output=True, text=True, env=environment(**env), cwd=cwd, timeout=scaled(30),
    )  # fmt: skip


def mnemo_run_here(config: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`mnemo_run` in this process: the command line parsed by the same `main`, with only
    `env` of ours in the environment and `cwd` the working directory while it runs."""
    args = ["--config", str(config), "run"]
    unset: dict[str, str | None] = dict.fromkeys(_OURS)
    old = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, args, input="", env={**unset, "USER": "ada", **env})
    finally:
        os.chdir(old)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))  # shown, and failed
    return subprocess.CompletedProcess(["mnemo", *args], result.exit_code, result.stdout, stderr)


@pytest.fixture
def deploy(tmp_path: Path) -> Path:
    """A deployment folder with the repository's skills; tests write mnemo.yaml in it."""
    folder = tmp_path / "deploy"
    folder.mkdir()
    (folder / "skills").symlink_to(ROOT / "skills")
    return folder


def one_line_exit_2(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("platform", "variable"), [("telegram", "TELEGRAM_BOT_TOKEN"), ("discord", "DISCORD_BOT_TOKEN")]
)
def test_a_platform_enabled_without_its_token(
    deploy: Path, tmp_path: Path, platform: str, variable: str
) -> None:
    config = deploy / "mnemo.yaml"
    config.write_text(f"{platform}: {{enabled: true}}\n", encoding="utf-8")
    run = mnemo_run if platform == "telegram" else mnemo_run_here  # one real process
    line = one_line_exit_2(run(config, tmp_path))
    assert line == (
        f"mnemo: config error: {platform}.enabled is true but {variable} is not set: set it, "
        f"or set {platform}.enabled to false"
    )
    assert not (deploy / "data").exists()  # nothing started, nothing created


def test_a_webhook_without_its_secret(deploy: Path) -> None:
    config = deploy / "mnemo.yaml"
    config.write_text("telegram: {webhook: {url: 'https://bot.example/hook'}}\n", "utf-8")
    line = one_line_exit_2(mnemo_run_here(config, deploy, TELEGRAM_BOT_TOKEN="123:abc"))
    assert line.startswith("mnemo: config error: telegram: ")
    assert "webhook.url is set: set TELEGRAM_WEBHOOK_SECRET too" in line
    assert not (deploy / "data").exists()


def _missing(deploy: Path) -> Path:
    return deploy / "nowhere"


def _a_file(deploy: Path) -> Path:
    (deploy / "notes.txt").write_text("not a folder\n", encoding="utf-8")
    return deploy / "notes.txt"


def _a_symlink_loop(deploy: Path) -> Path:
    (deploy / "loop").symlink_to(deploy / "loop")
    return deploy / "loop"


def test_a_missing_skills_folder(deploy: Path, tmp_path: Path) -> None:
    config = deploy / "mnemo.yaml"
    config.write_text("skills: {dir: nowhere}\n", encoding="utf-8")
    line = one_line_exit_2(mnemo_run_here(config, tmp_path))  # started elsewhere: still the file's
    assert line == (
        f"mnemo: config error: skills.dir: {deploy / 'nowhere'} does not exist (create it, or "
        "point skills.dir (or MNEMO_SKILLS_DIR) at the skills folder)"
    )
    assert not (deploy / "data").exists()


def test_an_unreadable_skills_folder(deploy: Path) -> None:
    (deploy / "loop").symlink_to(deploy / "loop")  # unreadable even for root
    config = deploy / "mnemo.yaml"
    config.write_text("skills: {dir: loop}\n", encoding="utf-8")
    line = one_line_exit_2(mnemo_run_here(config, deploy))
    assert line == (
        f"mnemo: config error: skills.dir: cannot read {deploy / 'loop'}: "
        "Too many levels of symbolic links"
    )


def problems_of(deploy: Path, text: str, **env: str) -> list[str]:
    config = deploy / "mnemo.yaml"
    config.write_text(text, encoding="utf-8")
    return startup_problems(load_config(config, environ=env))


def test_a_skills_folder_that_is_a_file(deploy: Path) -> None:
    (deploy / "notes.txt").write_text("not a folder\n", encoding="utf-8")
    assert problems_of(deploy, "skills: {dir: notes.txt}\n") == [
        f"config error: skills.dir: {deploy / 'notes.txt'} is not a folder (point skills.dir "
        "(or MNEMO_SKILLS_DIR) at the skills folder)"
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any folder")
def test_a_skills_folder_without_read_permission(deploy: Path) -> None:
    locked = deploy / "locked"
    locked.mkdir(mode=0)
    try:
        config = deploy / "mnemo.yaml"
        config.write_text("skills: {dir: locked}\n", encoding="utf-8")
        line = one_line_exit_2(mnemo_run_here(config, deploy))
    finally:
        locked.chmod(0o700)
    assert line == f"mnemo: config error: skills.dir: cannot read {locked}: Permission denied"


def test_the_skills_folder_from_the_environment_is_checked_too(
    deploy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(deploy.parent)  # an environment path is relative to where mnemo starts
    problems = problems_of(deploy, "shutdown_grace: 1\n", MNEMO_SKILLS_DIR="gone")
    assert problems == [
        f"config error: skills.dir: {deploy.parent / 'gone'} does not exist (create it, or "
        "point skills.dir (or MNEMO_SKILLS_DIR) at the skills folder)"
    ]


def test_a_data_dir_that_is_a_file(deploy: Path) -> None:
    (deploy / "data").write_text("oops\n", encoding="utf-8")
    assert problems_of(deploy, "shutdown_grace: 1\n") == [
        f"config error: home: {deploy / 'data'} is not a folder (set home or MNEMO_HOME)"
    ]


def test_a_data_dir_inside_a_file(deploy: Path) -> None:
    (deploy / "data").write_text("oops\n", encoding="utf-8")
    assert problems_of(deploy, "home: data/inner\n") == [
        f"config error: home: cannot create {deploy / 'data' / 'inner'} in {deploy / 'data'} "
        "(set home or MNEMO_HOME)"
    ]


def test_a_good_set_up_has_no_problems(deploy: Path) -> None:
    assert problems_of(deploy, "home: new/data\n", TELEGRAM_BOT_TOKEN="123:abc") == []
    assert not (deploy / "new").exists()  # checking creates nothing


def test_several_mistakes_are_each_named_on_a_line(tmp_path: Path) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_text(
        "telegram: {enabled: true}\ndiscord: {enabled: true}\nskills: {dir: gone}\n", "utf-8"
    )
    loaded = load_config(config, environ={})
    problems = startup_problems(loaded)
    assert [p.split(":")[1].strip() for p in problems] == [
        "telegram.enabled is true but TELEGRAM_BOT_TOKEN is not set",
        "discord.enabled is true but DISCORD_BOT_TOKEN is not set",
        "skills.dir",
    ]
    with pytest.raises(ConfigError) as caught:
        check_startup(loaded)
    assert str(caught.value) == "\n".join(problems)
    assert not (tmp_path / "data").exists() and not (tmp_path / "gone").exists()


# ----- a config file elsewhere ------------------------------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with serving_in_thread(FakeOpenAI(chunk_size=8)) as server:
        yield server


@pytest.mark.slow  # a whole run with a turn: about 3 s each on a busy machine
@pytest.mark.parametrize("how", ["--config", "MNEMO_CONFIG"])
def test_run_from_another_directory_uses_the_config_files_data_and_skills(
    fake: FakeOpenAI, tmp_path: Path, how: str
) -> None:
    deploy, elsewhere = tmp_path / "deploy", tmp_path / "elsewhere"
    (deploy / "my-skills" / "greeting-in-french").mkdir(parents=True)
    (deploy / "my-skills" / "greeting-in-french" / "SKILL.md").write_text(SKILL, "utf-8")
    elsewhere.mkdir()
    config = deploy / "mnemo.yaml"
    config.write_text("home: state\nskills: {dir: my-skills}\n", encoding="utf-8")
    fake.say("Bonjour Ada.")
    option = ["--config", str(config)] if how == "--config" else []
    env = environment(OPENAI_BASE_URL=fake.url + "/v1")
    if how == "MNEMO_CONFIG":
        env["MNEMO_CONFIG"] = os.path.relpath(config, elsewhere)  # relative to where it starts
    result = subprocess.run(
        [str(MNEMO), *option, "run", "--console"], input="greet me in French\n",
        capture_output=True, text=True, env=env, cwd=elsewhere, timeout=scaled(30),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Bonjour Ada." in result.stdout
    assert (
        f"serving console with data in {deploy / 'state'} and skills in {deploy / 'my-skills'}"
        in result.stderr
    )
    assert (deploy / "state" / "state.db").is_file()
    assert list(elsewhere.iterdir()) == []  # nothing in the directory it was started from
    system = fake.requests[0].body["messages"][0]["content"]
    assert "greeting-in-french" in json.dumps(system)  # the file's skills reach the model


def test_a_start_with_no_model_set_up_says_how_in_one_line(tmp_path: Path) -> None:
    bare = load_config(None, environ={"MNEMO_HOME": str(tmp_path / "data")})
    note = model_setup_note(bare)
    assert note is not None and "OPENAI_BASE_URL" in note and "OPENAI_API_KEY" in note
    assert "mnemo doctor" in note and "\n" not in note
    keyed = load_config(None, environ={"OPENAI_API_KEY": "sk-test-key-123456"})
    assert model_setup_note(keyed) is None
    local = load_config(None, environ={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert model_setup_note(local) is None


def test_a_missing_default_skills_folder_is_made_and_said_a_named_one_stays_a_mistake(
    tmp_path: Path,
) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "mnemo.yaml").write_text("shutdown_grace: 5\n", encoding="utf-8")
    config = load_config(bare / "mnemo.yaml", environ={})
    made = default_skills_folder(config)
    assert made is not None and str(bare / "skills") in made and "\n" not in made
    assert (bare / "skills").is_dir() and startup_problems(config) == []
    assert default_skills_folder(config) is None  # there now: nothing more to say

    named = tmp_path / "named"
    named.mkdir()
    (named / "mnemo.yaml").write_text("skills: {dir: mine}\n", encoding="utf-8")
    config = load_config(named / "mnemo.yaml", environ={})
    assert default_skills_folder(config) is None and not (named / "mine").exists()
    assert [p.split(":")[1].strip() for p in startup_problems(config)] == ["skills.dir"]
    by_env = load_config(bare / "mnemo.yaml", environ={"MNEMO_SKILLS_DIR": str(tmp_path / "x")})
    assert default_skills_folder(by_env) is None and not (tmp_path / "x").exists()

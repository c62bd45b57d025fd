"""The Dockerfile's structure (no container engine on these machines) and its entry
command run as the image would: no platform token and no terminal, one line and a
non-zero exit, not a console that ends at once under a restart policy."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def index_of(steps: list[tuple[str, str]], word: str, pattern: str) -> int:
    for i, (name, rest) in enumerate(steps):
        if name == word and re.search(pattern, rest):
            return i
    raise AssertionError(f"no {word} matching {pattern!r} in the Dockerfile")


def test_locked_dependencies_are_installed_before_the_code_is_copied() -> None:
    steps = instructions()
    lock = index_of(steps, "COPY", r"^requirements\.lock ")
    install = index_of(steps, "RUN", r"pip install .*-r requirements\.lock")
    code = index_of(steps, "COPY", r"^gateway ")
    assert lock < install < code
    assert not any(name == "COPY" and i < install for i, (name, _) in enumerate(steps) if i != lock)
    assert (ROOT / "requirements.lock").is_file()
    assert "-c requirements.lock" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_every_runtime_dependency_is_locked_to_one_version() -> None:
    locked = {}
    for line in (ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"{line!r} is not pinned with =="
            locked[re.sub(r"[-_.]+", "-", name).lower()] = version
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = pyproject.split("dependencies = [", 1)[1].split("]\n", 1)[0]
    for requirement in re.findall(r'"([^"]+)"', block):
        name = re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0]
        assert re.sub(r"[-_.]+", "-", name).lower() in locked, f"{name} is not in the lock"


def test_the_image_checks_health_runs_as_a_settable_user_and_stops_on_sigterm() -> None:
    steps = instructions()
    names = [name for name, _ in steps]
    (check,) = [rest for name, rest in steps if name == "HEALTHCHECK"]
    assert "/healthz" in check and "urllib" in check and "curl" not in check
    assert ("STOPSIGNAL", "SIGTERM") in steps
    assert ("ARG", "UID=10001") in steps and ("ARG", "GID=10001") in steps
    user = [rest for name, rest in steps if name == "USER"]
    assert user and user[-1] not in ("root", "0")
    assert names.index("USER") > index_of(steps, "RUN", r"useradd .*--uid \"?\$\{UID\}")
    env = " ".join(rest for name, rest in steps if name == "ENV")
    assert "MNEMO_HEALTH_ENABLED=true" in env
    assert "--stop-timeout" in DOCKERFILE.read_text(encoding="utf-8")


def image_command() -> tuple[list[str], dict[str, str]]:
    """The image's ENTRYPOINT + CMD and its ENV."""
    steps = instructions()
    (entry,) = [json.loads(rest) for name, rest in steps if name == "ENTRYPOINT"]
    (cmd,) = [json.loads(rest) for name, rest in steps if name == "CMD"]
    env: dict[str, str] = {}
    for name, rest in steps:
        if name == "ENV":
            env.update(pair.split("=", 1) for pair in rest.split())
    return [*entry, *cmd], env


@pytest.mark.slow  # a real mnemo process (about 3 s to import on a loaded machine)
def test_the_entry_command_without_a_token_or_terminal_exits_with_one_line(
    tmp_path: Path,
) -> None:
    command, image_env = image_command()
    assert command == ["mnemo", "run"]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_BOT_TOKEN")}
    env.pop("MNEMO_CONFIG", None)
    env.update(image_env)
    env.update(MNEMO_HOME=str(tmp_path / "data"), MNEMO_SKILLS_DIR=str(ROOT / "skills"))
    mnemo = Path(sys.executable).parent / command[0]
    proc = subprocess.run(
        [str(mnemo), *command[1:]], stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=scaled(60), cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("mnemo: no platform to serve: set TELEGRAM_BOT_TOKEN or DISCORD")
    assert "--console" in line

"""`mnemo --version` loads no part of the application, and a command group's help loads
neither the model client nor the platforms' libraries: each command loads what it runs."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.timing import scaled

HEAVY = ("pydantic", "memory_core", "gateway.config", "openai", "telegram", "discord", "aiohttp")
"""What `mnemo --version` never needs (the application's heavy parts)."""


def loaded_after(*args: str) -> list[str]:
    """The heavy modules a fresh interpreter holds after `mnemo <args>`."""
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from gateway.cli import main\n"
        f"result = CliRunner().invoke(main, {list(args)!r})\n"
        "assert result.exit_code == 0, result.output\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=scaled(120),
    )
    names: list[str] = json.loads(proc.stdout.splitlines()[-1])
    return [n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY)]


def test_version_loads_none_of_the_application() -> None:
    assert loaded_after("--version") == []


def test_a_commands_help_loads_no_model_client_adapter_or_scheduler() -> None:
    for group in ("jobs", "users", "memory", "sessions", "skills", "storage", "doctor"):
        found = loaded_after(group, "--help")
        assert not [n for n in found if n.split(".")[0] in ("openai", "telegram", "discord")]

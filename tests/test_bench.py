"""The benchmark scripts print the machine they ran on and give the same data for the same seed."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.timing import scaled

BENCH = Path(__file__).resolve().parent.parent / "bench"
MODULES = {"machine.py", "pg_count.py", "pg_top.py"}  # imported by the benches, not run alone
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if p.name not in MODULES)


def _calls(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_bench_prints_the_machine(script: Path) -> None:
    assert "describe" in _calls(script), f"{script.name} does not print describe()"


def test_the_machine_line_names_cores_python_and_sqlite() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH / "machine.py")], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("machine: ")
    for part in (" cores, Python 3.", ", SQLite 3.", "load average"):
        assert part in out


# Scripts that print the sha256 of the corpus they generate: arguments for a quick, small run.
DIGEST_ARGS = {
    "import.py": ["--digest", "--messages", "2000"],
    "planted_recall.py": ["--people", "2", "--sessions", "5", "--questions", "2"],
    "search_scale.py": ["--digest", "--messages", "2000", "--users", "20"],
}


# Scripts that print a sha256 of something else: tokens_speed.py of the literals it makes
# (its corpus is import.py's, checked above).
NOT_CORPUS = {"tokens_speed.py"}


def test_every_bench_that_generates_a_corpus_is_checked() -> None:
    digesting = {
        p.name
        for p in SCRIPTS
        if "sha256" in p.read_text(encoding="utf-8") and p.name not in NOT_CORPUS
    }
    assert digesting == set(DIGEST_ARGS)


@pytest.mark.parametrize("name", sorted(DIGEST_ARGS))
def test_the_same_seed_gives_the_same_corpus_whatever_the_hash_seed(name: str) -> None:
    def digest(hash_seed: str) -> str:
        out = subprocess.run(
            [sys.executable, str(BENCH / name), "--seed", "7", *DIGEST_ARGS[name]],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": hash_seed, "PATH": "/usr/bin:/bin"},
            timeout=scaled(60),
        ).stdout
        return next(line for line in out.splitlines() if "sha256" in line)

    assert digest("1") == digest("2")

"""The package layers of STYLE.md, checked by reading the imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "memory_core")
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80

# third-party top-level name -> modules allowed to import it (path prefixes)
RESTRICTED = {
    "telegram": ("gateway/adapters/",),
    "discord": ("gateway/adapters/",),
    "openai": ("gateway/agent/model_client.py",),
    "apscheduler": ("gateway/scheduler.py",),
}


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("path", _modules(), ids=_rel)
def test_layers(path: Path) -> None:
    rel = _rel(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for name in _imports(tree):
        top = name.split(".")[0]
        if rel.startswith("memory_core/"):
            assert top != "gateway", f"{rel} imports {name}: memory_core must not use gateway"
            assert top not in RESTRICTED, f"{rel} imports {name}: memory_core stays pure"
        if top in RESTRICTED:
            allowed = RESTRICTED[top]
            assert rel.startswith(allowed), f"{rel} imports {name}; only {allowed} may"
        if rel.startswith("gateway/adapters/"):
            assert not name.startswith(("gateway.agent", "memory_core")), (
                f"{rel} imports {name}: adapters never touch storage or the agent"
            )


@pytest.mark.parametrize("path", _modules(), ids=_rel)
def test_sizes(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") <= MAX_MODULE_LINES, f"{_rel(path)} is over {MAX_MODULE_LINES} lines"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            assert length <= MAX_FUNCTION_LINES, (
                f"{_rel(path)}:{node.lineno} {node.name}() is {length} lines"
            )


def test_the_checker_sees_a_violation() -> None:
    tree = ast.parse("import telegram\nfrom gateway.config import Config\n")
    assert _imports(tree) == {"telegram", "gateway.config"}


def test_no_import_time_work() -> None:
    """Importing every module opens no files, sockets or databases (a fresh interpreter)."""
    import subprocess
    import sys

    mods = [_rel(p)[:-3].replace("/", ".").removesuffix(".__init__") for p in _modules()]
    code = (
        "import socket, sqlite3, sys\n"
        "def boom(*a, **k): raise SystemExit('work at import time: ' + repr(a[:1]))\n"
        "socket.socket.connect = boom\n"
        "sqlite3.connect = boom\n"
        f"for m in {mods!r}:\n"
        "    __import__(m)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr or proc.stdout

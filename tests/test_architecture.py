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


# What code outside memory_core may import from it: the package and its subpackages.
MEMORY_CORE_PUBLIC = frozenset(
    {
        "memory_core",
        "memory_core.sessions",
        "memory_core.file_memory",
        "memory_core.skills",
        "memory_core.providers",
    }
)


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _consumers() -> list[Path]:
    """Modules outside memory_core that must use only its public API."""
    return sorted([*(ROOT / "gateway").rglob("*.py"), *(ROOT / "bench").rglob("*.py")])


def _packages() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py"))


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


def private_memory_core_imports(tree: ast.AST) -> list[str]:
    """The memory_core modules `tree` imports that are not its public API."""
    private = []
    for name in _imports(tree):
        if name.split(".")[0] == "memory_core" and name not in MEMORY_CORE_PUBLIC:
            private.append(name)
    for node in ast.walk(tree):  # `from memory_core.sessions import store` names a module too
        if isinstance(node, ast.ImportFrom) and node.module in MEMORY_CORE_PUBLIC:
            for alias in node.names:
                if (ROOT / node.module.replace(".", "/") / f"{alias.name}.py").exists():
                    private.append(f"{node.module}.{alias.name}")
    return sorted(private)


@pytest.mark.parametrize("path", _consumers(), ids=_rel)
def test_outside_memory_core_only_its_public_api_is_used(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert private_memory_core_imports(tree) == [], f"{_rel(path)} reaches inside memory_core"


@pytest.mark.parametrize("path", _packages(), ids=_rel)
def test_package_all_lists_exactly_what_it_exports(path: Path) -> None:
    """`__all__` names only what exists, once; a library package (memory_core and
    its subpackages, gateway.commands) has one, listing every name it imports from itself."""
    import importlib

    module_name = _rel(path)[: -len("/__init__.py")].replace("/", ".")
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    library = module_name.startswith("memory_core") or module_name == "gateway.commands"
    if exported is None:
        assert not library, f"{module_name} has no __all__"
        return
    # Its order is ruff's (RUF022), checked by `ruff check`.
    assert len(exported) == len(set(exported)), f"{module_name}.__all__ repeats a name"
    assert [n for n in exported if not hasattr(module, n)] == []
    if library:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = {
            alias.asname or alias.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == module_name.split(".")[0]
            for alias in node.names
        }
        assert sorted(own - set(exported)) == [], f"{module_name} imports names it doesn't export"


def test_the_checker_sees_a_violation() -> None:
    tree = ast.parse("import telegram\nfrom gateway.config import Config\n")
    assert _imports(tree) == {"telegram", "gateway.config"}


def test_the_checker_sees_a_private_memory_core_import() -> None:
    tree = ast.parse(
        "from memory_core.sessions.store import SessionStore\n"
        "from memory_core.sessions import search\n"
        "from memory_core.safety import scan\n"
        "from memory_core.sessions import SessionStore\n"
        "from memory_core import SessionDB\n"
    )
    assert private_memory_core_imports(tree) == [
        "memory_core.safety",
        "memory_core.sessions.search",
        "memory_core.sessions.store",
    ]


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

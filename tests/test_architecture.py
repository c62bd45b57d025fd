"""The package layers of STYLE.md, checked by reading the imports."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.timing import scaled

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "memory_core")
MAX_MODULE_LINES = 600  # STYLE.md: over 600 needs a reason; none has one now
MAX_FUNCTION_LINES = 80
ROUTER_LINES = 250

# third-party top-level name -> modules allowed to import it (path prefixes)
RESTRICTED = {
    "telegram": ("gateway/adapters/",),
    "discord": ("gateway/adapters/",),
    "openai": ("gateway/agent/model_client.py",),
    "apscheduler": ("gateway/scheduler.py",),
    # the store implementations: nothing else knows which database it talks to. The
    # PostgreSQL index takes its words from SQLite's own FTS5 tokenizer, so both rank alike.
    "sqlite3": ("memory_core/sessions/", "memory_core/pg/search_text.py"),
    "psycopg": ("memory_core/pg/",),
    "psycopg_pool": ("memory_core/pg/",),
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
            assert top not in RESTRICTED or rel.startswith(RESTRICTED[top]), (
                f"{rel} imports {name}: memory_core stays pure outside its stores"
            )
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


def test_the_router_only_routes() -> None:
    """The floor plan: conversation.py decides access, command or turn, and order; the turn
    is gateway/turns.py, the sessions gateway/open_sessions.py. Growth belongs there."""
    lines = (ROOT / "gateway" / "conversation.py").read_text(encoding="utf-8").count("\n")
    assert lines <= ROUTER_LINES, f"gateway/conversation.py is {lines} lines (<= {ROUTER_LINES})"


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
            for node in _package_level(tree)
            if isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == module_name.split(".")[0]
            for alias in node.names
        }
        assert sorted(own - set(exported)) == [], f"{module_name} imports names it doesn't export"


def _package_level(tree: ast.Module) -> list[ast.stmt]:
    """A package's top-level statements, with those of a top-level `if TYPE_CHECKING:`
    (a lazy package imports its names there, for the type checker)."""
    statements: list[ast.stmt] = []
    for node in tree.body:
        statements.append(node)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            statements.extend(node.body)
    return statements


def test_a_lazy_packages_type_checking_imports_are_read() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from memory_core.scopes import SearchScope\n"
    )
    names = [
        alias.name
        for node in _package_level(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]
    assert names == ["TYPE_CHECKING", "SearchScope"]


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
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=scaled(120)
    )
    assert proc.returncode == 0, proc.stderr or proc.stdout


# Import cycles: a graph of the modules in PACKAGES, read from every import line.


def module_names(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Every module under `packages` by dotted name; a package is its `__init__.py`."""
    names = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            dotted = path.relative_to(root).with_suffix("").as_posix().replace("/", ".")
            names[dotted.removesuffix(".__init__")] = path
    return names


def _import_base(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The package a `from … import` reads from, with relative levels resolved."""
    if node.level == 0:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def import_edges(module: str, path: Path, known: set[str]) -> set[str]:
    """The known modules that `module` imports anywhere in its file: top level, in
    functions and under `if TYPE_CHECKING:`. A parent package Python loads on the
    way is not an edge; `from P import name` is an edge to `P.name` when that is
    a module, else to `P`."""
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _import_base(module, path, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in known else base)
    return targets & known


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    modules = module_names(root, packages)
    known = set(modules)
    return {name: import_edges(name, path, known) for name, path in modules.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def _shortest_cycle(graph: dict[str, set[str]], start: str, within: set[str]) -> list[str]:
    """The shortest path start -> … -> start that stays inside `within` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & within):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]  # [start, start] for a self-import
                if target not in came_from:
                    came_from[target] = node
                    following.append(target)
        frontier = following
    return []


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Each import cycle as a path `a -> b -> a`: for every module in a strongly
    connected component of more than one module (or importing itself), the shortest
    cycle through it, each cycle listed once."""
    cycles: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for component in strongly_connected(graph):
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        for start in component:
            cycle = _shortest_cycle(graph, start, set(component))[:-1]
            first = cycle.index(min(cycle))
            rotated = (*cycle[first:], *cycle[:first])  # the same cycle from another module
            if rotated not in seen:
                seen.add(rotated)
                cycles.append(" -> ".join([*rotated, rotated[0]]))
    return cycles


def test_no_import_cycles() -> None:
    cycles = import_cycles(import_graph(ROOT, PACKAGES))
    assert cycles == [], "import cycles (cut one edge of each):\n" + "\n".join(cycles)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_the_cycle_checker_finds_a_cycle(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": "from .sub import c\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "from ..a import thing\n",
            "pkg/d.py": "import pkg.a\n",  # imports into the cycle, is not part of it
            "pkg/e.py": "from . import e\n",
        },
    )
    graph = import_graph(root, ("pkg",))
    assert graph["pkg.a"] == {"pkg.b"}
    assert graph["pkg.b"] == {"pkg.sub.c"}
    assert graph["pkg.sub.c"] == {"pkg.a"}
    assert graph["pkg.d"] == {"pkg.a"}  # the parent `pkg` it loads on the way is no edge
    assert import_cycles(graph) == [
        "pkg.a -> pkg.b -> pkg.sub.c -> pkg.a",
        "pkg.e -> pkg.e",
    ]


def test_the_cycle_checker_counts_function_and_type_checking_imports(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\n",
            "pkg/a.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from pkg.b import B\n"
                "class A: ...\n"
            ),
            "pkg/b.py": "def late():\n    import pkg\n    return pkg.A\n",
        },
    )
    graph = import_graph(root, ("pkg",))
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": {"pkg"}}
    assert import_cycles(graph) == ["pkg -> pkg.a -> pkg.b -> pkg"]


# The transitive rule: what Python loads, not only what the import lines say.

LIGHT_MODULES = sorted(
    [
        *(n for n in module_names(ROOT, PACKAGES) if n.startswith("gateway.adapters")),
        "gateway.delivery",
    ]
)
HEAVY_PACKAGES = ("memory_core.sessions", "memory_core.safety")

# One fresh interpreter imports the light modules one after another, then the composition
# root. A meta path finder that never finds anything records, for each module, the chain
# of modules on the stack when it was first asked for; after each import, the modules it
# newly loaded are noted. A light module loads a heavy one iff the heavy one first appears
# at its step: none is loaded before (each earlier step is checked heavy-free), and a
# module loaded at an earlier step had made its imports then.
_LOADED_BY = """
import json, sys

chains = {}

class Recorder:
    def find_spec(self, name, path=None, target=None):
        if name not in chains:
            stack, frame = [], sys._getframe(1)
            while frame:
                caller = frame.f_globals.get("__name__", "?")
                if not caller.startswith(("importlib", "_frozen_importlib", "__main__")):
                    if not stack or stack[-1] != caller:
                        stack.append(caller)
                frame = frame.f_back
            chains[name] = stack[::-1]
        return None

sys.meta_path.insert(0, Recorder())
steps = {}
for module in sys.argv[1:]:
    before = set(sys.modules)
    __import__(module)
    steps[module] = {name: chains.get(name, []) for name in set(sys.modules) - before}
print(json.dumps(steps))
"""
COMPOSITION_ROOT = "gateway.app"  # loads everything: the check's own check


@functools.cache
def _loaded_steps() -> dict[str, dict[str, list[str]]]:
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _LOADED_BY, *LIGHT_MODULES, COMPOSITION_ROOT],
        capture_output=True, text=True, cwd=ROOT, timeout=scaled(120),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr or proc.stdout
    steps: dict[str, dict[str, list[str]]] = json.loads(proc.stdout)
    return steps


def heavy_imports(module: str) -> list[str]:
    """The modules under HEAVY_PACKAGES that importing `module` (after the light modules
    before it, in one fresh interpreter) loads: each one that code outside them asked
    for, shown as the chain of modules from `module` to it."""

    def heavy(name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in HEAVY_PACKAGES)

    loaded = _loaded_steps()[module]
    return [
        " -> ".join([*loaded[name], name])
        for name in sorted(filter(heavy, loaded))
        if not (loaded[name] and heavy(loaded[name][-1]))  # else its chain is shown already
    ]


@pytest.mark.parametrize("module", LIGHT_MODULES)
def test_adapters_and_delivery_load_no_storage_or_safety(module: str) -> None:
    found = heavy_imports(module)
    assert found == [], f"importing {module} loads storage or safety:\n" + "\n".join(found)


def test_the_transitive_check_sees_a_violation() -> None:
    found = heavy_imports(COMPOSITION_ROOT)
    assert any(line.endswith(" -> memory_core.sessions") for line in found), found
    assert all(line.startswith("gateway.app -> ") for line in found), found

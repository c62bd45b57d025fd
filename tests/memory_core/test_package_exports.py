"""memory_core's lazy exports: one table, the same imports for mypy, and a light import."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import memory_core

INIT = Path(memory_core.__file__)


def _type_checking_imports() -> set[tuple[str, str]]:
    """(module, name) of every import under the top-level `if TYPE_CHECKING:`."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1, "memory_core/__init__.py needs one `if TYPE_CHECKING:` block"
    found = set()
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom) and node.module, ast.unparse(node)
        found.update((node.module, alias.name) for alias in node.names if alias.asname is None)
    return found


def _table() -> set[tuple[str, str]]:
    return {(module, name) for module, names in memory_core._EXPORTS.items() for name in names}


def test_the_type_checking_imports_are_the_table() -> None:
    imports = _type_checking_imports()
    table = _table()
    assert sorted(imports - table) == [], "imported for mypy but not in _EXPORTS"
    assert sorted(table - imports) == [], "in _EXPORTS but not imported for mypy"


def test_all_is_the_table() -> None:
    names = [name for _, name in _table()]
    assert len(names) == len(set(names)), "a name is in _EXPORTS twice"
    assert sorted(memory_core.__all__) == sorted(names)


@pytest.mark.parametrize("name", memory_core.__all__)
def test_every_name_resolves_to_its_module(name: str) -> None:
    module = importlib.import_module(memory_core._MODULE_OF[name])
    assert getattr(memory_core, name) is getattr(module, name)
    assert name in dir(memory_core)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        _ = memory_core.NoSuchName  # type: ignore[attr-defined]


def test_the_bottom_names_load_neither_sessions_nor_safety() -> None:
    """In a fresh interpreter: scopes, user keys and the scrubber come without the store."""
    code = (
        "import sys\n"
        "from memory_core import (ChatType, SearchScope, recall_scope, make_user_key,\n"
        "    StreamingContextScrubber, scrub_context)\n"
        "print(' '.join(m for m in sys.modules if m.startswith('memory_core')))\n"
    )
    root = INIT.parent.parent
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.split()
    assert "memory_core.scopes" in loaded
    heavy = [m for m in loaded if m.startswith(("memory_core.sessions", "memory_core.safety"))]
    assert heavy == []

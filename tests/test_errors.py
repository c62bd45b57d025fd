"""Each package's `errors.py` holds all its errors, and its docstring draws their tree."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "memory_core")
_NAME = re.compile(r"[A-Za-z_]\w*")


def parse_tree(doc: str) -> dict[str, str | None]:
    """Each class drawn in `doc` mapped to its parent (None for the root).

    A line names a class by the first identifier after its box-drawing prefix;
    its parent is the nearest line above that starts further left.
    """
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in doc.splitlines():
        match = _NAME.search(line)
        if match is None or not match.group().endswith("Error"):
            continue
        prefix = line[: match.start()]
        if prefix.strip(" ├└─│") != "":
            continue  # prose that mentions an error, not a tree line
        column = match.start()
        while stack and stack[-1][0] >= column:
            stack.pop()
        name = match.group()
        assert name not in parents, f"{name} is drawn twice"
        parents[name] = stack[-1][1] if stack else None
        stack.append((column, name))
    return parents


def _errors_module(package: str) -> ModuleType:
    return importlib.import_module(f"{package}.errors")


def _defined_errors(module: ModuleType) -> dict[str, type[BaseException]]:
    return {
        name: cls
        for name, cls in vars(module).items()
        if inspect.isclass(cls)
        and issubclass(cls, BaseException)
        and cls.__module__ == module.__name__
    }


@pytest.mark.parametrize("package", PACKAGES)
def test_the_docstring_tree_matches_the_classes(package: str) -> None:
    module = _errors_module(package)
    tree = parse_tree(module.__doc__ or "")
    classes = _defined_errors(module)
    assert set(tree) == set(classes)
    for name, cls in classes.items():
        base = next(b for b in cls.__bases__ if issubclass(b, BaseException))  # past mixins
        expected = None if base in (Exception, BaseException) else base.__name__
        assert tree[name] == expected, f"{name} is drawn under {tree[name]}, derives {expected}"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_error_class_lives_outside_errors_py(package: str) -> None:
    strays = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if path.name == "errors.py" and path.parent == ROOT / package:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                strays.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert strays == []


def test_every_memory_core_error_can_be_caught_from_the_package() -> None:
    import memory_core

    missing = set(_defined_errors(_errors_module("memory_core"))) - set(memory_core.__all__)
    assert missing == set()


def test_the_parser_sees_nesting_and_a_wrong_parent() -> None:
    doc = "RootError\n ├── AError   a\n │    └── BError   b\n └── CError\n"
    assert parse_tree(doc) == {
        "RootError": None,
        "AError": "RootError",
        "BError": "AError",
        "CError": "RootError",
    }

"""One text for the SQL both session stores share: no statement is written twice.

Every string literal (and f-string, with its holes as ``{}``) that starts a SQL
statement is read from the SQLite store's modules (those that import
``sqlite3``) and from the PostgreSQL store's (``memory_core/pg``), and compared
once placeholders, case and spacing are made alike. A statement found on both
sides is a copy: it belongs in ``memory_core.sessions.sql``, rendered for each
backend by its `Dialect`. So is a near copy: two statements that differ only in
a few characters (a ``LIMIT 1`` on one side, ``IN`` against ``= ANY``) are
where the two backends drift apart.
"""

from __future__ import annotations

import ast
import difflib
import re
from pathlib import Path

import pytest

from memory_core.scopes import SearchScope
from memory_core.sessions import sql as shared
from memory_core.sessions.models import SearchOptions
from memory_core.sessions.sql import POSTGRES, SQLITE, Dialect, ScopeFilter, Statement, scope_sql

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "memory_core" / "sessions" / "sql"
_STARTS = re.compile(
    r"^\s*\(?\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b"
)  # SQL is written in capitals
MIN_CHARS = 24  # shorter texts ("SELECT 1") say nothing about drift
NEAR = 0.9  # difflib ratio above which two statements are one statement twice


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
        return "".join(str(p) for p in parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None or right is None else left + right
    return None


def normal(text: str) -> str:
    """A statement with placeholders, holes, case and spacing made alike."""
    text = text.replace("%%", "%").replace("%s", "?")
    text = re.sub(r"\{[^{}]*\}", "{}", text)
    return re.sub(r"\s+", " ", text).strip().lower()


def statements(path: Path) -> list[tuple[int, str]]:
    """The SQL statements written in one module, with their lines."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        text = _text(node) if isinstance(node, ast.Constant | ast.JoinedStr | ast.BinOp) else None
        if text and _STARTS.match(text) and len(text) >= MIN_CHARS:
            found.setdefault(normal(text), node.lineno)  # type: ignore[attr-defined]
    return [(line, text) for text, line in found.items()]


def _imports_sqlite(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "sqlite3" for a in node.names):
            return True
    return False


def sqlite_modules() -> list[Path]:
    paths = (ROOT / "memory_core").rglob("*.py")
    return sorted(
        p for p in paths if "pg" not in p.parts and SHARED not in p.parents and _imports_sqlite(p)
    )


def postgres_modules() -> list[Path]:
    return sorted((ROOT / "memory_core" / "pg").glob("*.py"))


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT).as_posix()}:{line}"


def _side(paths: list[Path]) -> dict[str, str]:
    return {text: _where(p, line) for p in paths for line, text in statements(p)}


def test_the_scanner_sees_both_stores_statements() -> None:
    """The checks below can fail: they read each store's own SQL (what is not shared:
    full-text lookups, row writes with their index columns, schema, bulk loads)."""
    assert len(_side(sqlite_modules())) > 25
    assert len(_side(postgres_modules())) > 25
    assert normal("SELECT a FROM t WHERE id = %s") == normal("select a\n  from t where id = ?")


def test_no_statement_is_written_for_both_backends() -> None:
    lite, pg = _side(sqlite_modules()), _side(postgres_modules())
    copies = [f"{lite[t]} and {pg[t]}: {t[:100]}" for t in sorted(lite.keys() & pg.keys())]
    assert not copies, "written twice; move to memory_core.sessions.sql:\n" + "\n".join(copies)


def test_no_statement_is_a_near_copy_of_the_other_backends() -> None:
    lite, pg = _side(sqlite_modules()), _side(postgres_modules())
    near = []
    for text, where in sorted(pg.items()):
        for other, other_where in lite.items():
            ratio = difflib.SequenceMatcher(None, text, other, autojunk=False).ratio()
            if ratio >= NEAR and text != other:
                near.append(f"{where} ~ {other_where} ({ratio:.2f}): {text[:90]}")
    assert not near, "near copies; share them with a dialect fragment:\n" + "\n".join(near)


def _shared_statements() -> list[tuple[str, Statement]]:
    found: list[tuple[str, Statement]] = []
    for path in sorted(SHARED.glob("*.py")):
        name = "memory_core.sessions.sql" + ("" if path.stem == "__init__" else f".{path.stem}")
        module = __import__(name, fromlist=["_"])
        found += [(f"{name}.{k}", v) for k, v in vars(module).items() if isinstance(v, Statement)]
    return found


def test_the_shared_statements_are_not_copied_anywhere() -> None:
    """What `memory_core.sessions.sql` holds is written nowhere else, on either side."""
    written = _side([*sqlite_modules(), *postgres_modules()])
    copies = [
        f"{name} also at {written[normal(s.template)]}"
        for name, s in _shared_statements()
        if normal(s.template) in written
    ]
    assert not copies, "\n".join(copies)


@pytest.mark.parametrize("dialect", [SQLITE, POSTGRES], ids=lambda d: d.name)
def test_a_statement_renders_each_dialects_placeholders_and_fragments(dialect: Dialect) -> None:
    statement = Statement("SELECT a FROM t WHERE b LIKE '%x' AND c = ?{for_update}")
    text = statement.of(dialect)
    if dialect is SQLITE:
        assert text == "SELECT a FROM t WHERE b LIKE '%x' AND c = ?"
    else:
        assert text == "SELECT a FROM t WHERE b LIKE '%%x' AND c = %s FOR UPDATE"
    assert dialect.any_of("x", [1, 2])[0] in ("x IN (?, ?)", "x = ANY(%s)")


@pytest.mark.parametrize("dialect", [SQLITE, POSTGRES], ids=lambda d: d.name)
def test_one_scope_filter_holds_every_condition_in_either_dialect(dialect: Dialect) -> None:
    scope = SearchScope("telegram-1", chat_id="g", thread_id="t")
    where, params = scope_sql(dialect, scope)
    assert params == ["telegram-1", "g", "t"]
    assert where.count(dialect.param) == 3
    options = SearchOptions(since=1.0, until=2.0, exclude_lineage_of=7)
    built = ScopeFilter.build(dialect, scope, options)
    assert built.sql.startswith(built.sessions_sql)
    assert built.params[-2:] == (1.0, 2.0) and 7 in built.sessions_params
    assert shared.DIALECTS == (SQLITE, POSTGRES)

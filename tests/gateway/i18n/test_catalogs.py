"""The catalogs hold every message the code uses, translated, with the same placeholders."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from gateway.i18n import LANGUAGES, N_, Catalogs, negotiate, parse_zone, zone_name
from gateway.i18n.audit import PACKAGE_DIR, add, extract, problems, sync
from gateway.i18n.catalogs import compile_po

ROOT = PACKAGE_DIR.parent


def test_every_message_the_code_uses_is_translated_with_its_placeholders() -> None:
    found = problems()
    assert not found, "\n".join(found[:40]) + "\n(run python -m gateway.i18n.audit check)"


def test_the_code_uses_messages_at_all() -> None:
    assert len(extract()) > 5  # the check above cannot pass by extracting nothing


def _write_po(tmp: Path, package: Path, code: str) -> Path:
    (package / "mod.py").write_text(code, encoding="utf-8")
    locales = tmp / "locales"
    locales.mkdir()
    sync(package, locales)
    return locales


def test_the_check_finds_a_missing_and_a_misplaced_placeholder(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    locales = _write_po(tmp_path, package, 'x = loc._("Found {count} in {place}", count=1)\n')
    assert any("not translated" in p for p in problems(package, locales))
    add(
        [{"id": "Found {count} in {place}", "zh": "在{place}找到 {total}", "es": "x {count}"}],
        locales,
    )
    found = problems(package, locales)
    assert any(p.startswith("zh:") and "placeholders" in p for p in found)
    assert any(p.startswith("es:") and "placeholders" in p for p in found)
    add(
        [
            {
                "id": "Found {count} in {place}",
                "zh": "在{place}找到 {count}",
                "es": "{count} en {place}",
            }
        ],
        locales,
    )
    assert problems(package, locales) == []
    (package / "mod.py").write_text('y = N_("Another")\n', encoding="utf-8")
    found = problems(package, locales)
    assert any("missing" in p for p in found) and any("not used" in p for p in found)


def test_plurals_are_checked_form_by_form(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    locales = _write_po(tmp_path, package, 'x = loc.n_("{n} entry", "{n} entries", 2)\n')
    add(
        [
            {
                "id": "{n} entry",
                "plural": "{n} entries",
                "zh": ["{n} 条"],
                "es": ["{n} entrada", "{n} entradas", "{n} entradas"],
            }
        ],
        locales,
    )  # CLDR: 3 forms
    assert problems(package, locales) == []
    catalogs = Catalogs(locales)
    assert catalogs.translator("es").n_("{n} entry", "{n} entries", 1) == "1 entrada"
    assert catalogs.translator("es").n_("{n} entry", "{n} entries", 3) == "3 entradas"
    assert catalogs.translator("zh").n_("{n} entry", "{n} entries", 3) == "3 条"
    assert catalogs.translator("en").n_("{n} entry", "{n} entries", 1) == "1 entry"


def test_a_checkout_with_a_stale_mo_reads_the_po(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    locales = _write_po(tmp_path, package, 'x = loc._("Hello")\n')
    add([{"id": "Hello", "zh": "你好", "es": "Hola"}], locales)
    po = locales / "zh" / "LC_MESSAGES" / "mnemo.po"
    mo = po.with_suffix(".mo")
    mo.write_bytes(compile_po(po))
    add([{"id": "Hello", "zh": "您好", "es": "Hola"}], locales)
    os.utime(mo, (po.stat().st_mtime - 10, po.stat().st_mtime - 10))  # older than the .po
    assert Catalogs(locales).translator("zh")._("Hello") == "您好"
    mo.write_bytes(compile_po(po))  # compiled again: read as it is
    assert Catalogs(locales).translator("zh")._("Hello") == "您好"


def test_a_translation_with_a_broken_placeholder_falls_back_to_english(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    locales = _write_po(tmp_path, package, 'x = loc._("Hi {name}")\n')
    add([{"id": "Hi {name}", "zh": "你好 {nom}", "es": "Hola {name}"}], locales)
    assert Catalogs(locales).translator("zh")._("Hi {name}", name="Ana") == "Hi Ana"
    assert Catalogs(locales).translator("es")._("Hi {name}", name="Ana") == "Hola Ana"


@pytest.mark.parametrize(
    ("tag", "language"),
    [
        ("zh-hans", "zh"), ("zh-CN", "zh"), ("zh_TW", "zh"), ("zh", "zh"), ("中文", "zh"),
        ("en-US", "en"), ("en", "en"), ("es-419", "es"), ("es_ES", "es"), ("Español", "es"),
        ("fr", None), ("", None), (None, None), ("pt-BR", None),
    ],
)  # fmt: skip
def test_negotiate(tag: str | None, language: str | None) -> None:
    assert negotiate(tag) == language


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Asia/Shanghai", "Asia/Shanghai"), ("asia/shanghai", "Asia/Shanghai"),
        ("UTC", "UTC"), ("utc+8", "UTC+8"), ("+08:00", "UTC+8"), ("GMT-5", "UTC-5"),
        ("UTC+0", "UTC"), ("America/Argentina/Buenos_Aires", "America/Argentina/Buenos_Aires"),
    ],
)  # fmt: skip
def test_parse_zone(text: str, name: str) -> None:
    zone = parse_zone(text)
    assert zone is not None and zone_name(zone) == name


@pytest.mark.parametrize("text", ["Mars/Olympus", "UTC+15", "../etc/passwd", "", "x" * 300])
def test_parse_zone_refuses(text: str) -> None:
    assert parse_zone(text) is None


def test_shipped_languages() -> None:
    assert LANGUAGES[0] == "en" and {"zh", "es"} <= set(LANGUAGES)
    assert N_("x") == "x"


# A line the bot writes itself is a catalog message, never a literal written straight out.
_SINKS = {"CommandReply", "write", "notify", "ChoiceRefusedError", "answer_callback"}


def _literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(node.value.strip()) and any(c.isalpha() for c in node.value)
    if isinstance(node, ast.JoinedStr):
        return any(
            isinstance(v, ast.Constant) and any(c.isalpha() for c in str(v.value))
            for v in node.values
        )
    return False


def _user_lines(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name in _SINKS and _literal(node.args[0]):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


USER_FACING = ("commands", "conversation.py", "turns.py", "jobs", "delivery", "agent/turn.py")


def test_no_user_line_is_a_bare_literal() -> None:
    paths = []
    for part in USER_FACING:
        target = PACKAGE_DIR / part
        paths += sorted(target.rglob("*.py")) if target.is_dir() else [target]
    found = [hit for path in paths for hit in _user_lines(path)]
    assert not found, "lines written without the catalog:\n" + "\n".join(found)

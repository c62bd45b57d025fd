"""Keeping the catalogs true to the code: extract, update, fill, check (for developers).

``python -m gateway.i18n.audit sync`` extracts every marked message of the
`gateway` package into ``locales/mnemo.pot`` and updates each language's
``.po`` from it (new messages empty, gone ones dropped, translations kept);
``add FILE.json`` fills translations from a list of
``{"id": …, ["plural": …,] "zh": …, "es": …}`` objects (a list of forms for a
plural), under a lock so that several people may add at once; ``check`` prints
every problem and exits 1 when there is one: a message the code uses and a
catalog lacks or leaves untranslated or fuzzy, a translation whose
``{placeholders}`` differ from its message's, an entry the code no longer uses.
The test suite runs the same check.
"""

from __future__ import annotations

import argparse
import json
import string
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po, write_po
from filelock import FileLock

from gateway.i18n.catalogs import DOMAIN, LANGUAGES, LOCALES_DIR

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # gateway/
KEYWORDS: dict[str, Any] = {"_": None, "N_": None, "n_": (1, 2)}
TRANSLATED = tuple(language for language in LANGUAGES if language != "en")
PO_WIDTH = 100
TEAM = "the Mnemo developers"
CREATED = datetime(2026, 12, 1, tzinfo=UTC)


def extract(package: Path = PACKAGE_DIR) -> Catalog:
    """Every message the code under `package` marks, with the files that use it."""
    catalog = Catalog(
        domain=DOMAIN,
        project="mnemo",
        charset="utf-8",
        copyright_holder=TEAM,
        creation_date=CREATED,  # fixed, so that a sync changes only what changed
        revision_date=CREATED,
        last_translator=TEAM,
        language_team=TEAM,
    )
    found = extract_from_dir(
        package,
        method_map=[("**.py", "python")],
        keywords=KEYWORDS,
        comment_tags=("i18n:",),
        strip_comment_tags=True,
    )
    for filename, lineno, message, comments, context in found:
        where = (f"gateway/{filename}", lineno)
        catalog.add(message, None, [where], auto_comments=comments, context=context)
    return catalog


def po_path(language: str, locales: Path = LOCALES_DIR) -> Path:
    return locales / language / "LC_MESSAGES" / f"{DOMAIN}.po"


def read_catalog(language: str, locales: Path = LOCALES_DIR) -> Catalog:
    path = po_path(language, locales)
    if not path.exists():
        return Catalog(
            locale=language,
            domain=DOMAIN,
            project="mnemo",
            copyright_holder=TEAM,
            creation_date=CREATED,
            revision_date=CREATED,
            last_translator=TEAM,
            language_team=TEAM,
            fuzzy=False,
        )
    with path.open("rb") as source:
        return read_po(source, locale=language, domain=DOMAIN)


def write_catalog(catalog: Catalog, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        # file names without line numbers: an edit elsewhere in a file changes no catalog
        write_po(out, catalog, width=PO_WIDTH, ignore_obsolete=True, include_lineno=False)


def sync(package: Path = PACKAGE_DIR, locales: Path = LOCALES_DIR) -> Catalog:
    """Write the template and bring each language's catalog up to it; the template."""
    template = extract(package)
    with FileLock(str(locales / ".lock")):
        write_catalog(template, locales / f"{DOMAIN}.pot")
        for language in TRANSLATED:
            catalog = read_catalog(language, locales)
            catalog.update(template, no_fuzzy_matching=True, update_creation_date=False)
            catalog.obsolete.clear()
            catalog.fuzzy = False  # the header: a fuzzy one would be left out of the .mo
            write_catalog(catalog, po_path(language, locales))
    return template


def add(items: Iterable[dict[str, Any]], locales: Path = LOCALES_DIR) -> int:
    """Set the translations `items` give; how many translations were set."""
    items = list(items)
    count = 0
    with FileLock(str(locales / ".lock")):
        for language in TRANSLATED:
            catalog = read_catalog(language, locales)
            for item in items:
                if language not in item:
                    continue
                key = (item["id"], item["plural"]) if "plural" in item else item["id"]
                text = item[language]
                value = tuple(text) if isinstance(text, list) else text
                existing = catalog.get(item["id"])
                if existing is not None:
                    existing.string = value
                    existing.flags.discard("fuzzy")
                else:
                    catalog.add(key, value)
                count += 1
            write_catalog(catalog, po_path(language, locales))
    return count


def problems(
    package: Path = PACKAGE_DIR, locales: Path = LOCALES_DIR, only: str | None = None
) -> list[str]:
    """What is wrong with the shipped catalogs against the code (empty: nothing); `only`:
    just the messages used in files whose path starts with it ("gateway/commands/")."""
    template = extract(package)
    if only is not None:
        kept = [m for m in template if m.id and any(f.startswith(only) for f, _ in m.locations)]
        template = Catalog(domain=DOMAIN)
        for message in kept:
            template[message.id] = message
    found: list[str] = []
    for message in template:
        if message.id and not isinstance(message.id, str):
            singular, _plural = message.id
            if _fields(singular) - {"n"} != _fields(_plural) - {"n"}:
                found.append(f"en: {singular!r}: the plural has other placeholders")
    for language in TRANSLATED:
        catalog = read_catalog(language, locales)
        for message in template:
            if not message.id:
                continue
            found.extend(_entry_problems(language, message, catalog.get(message.id)))
        for message in catalog:
            if only is None and message.id and template.get(message.id) is None:
                found.append(f"{language}: {_name(message)}: not used by the code any more")
    return found


def _entry_problems(language: str, wanted: Message, have: Message | None) -> list[str]:
    name = _name(wanted)
    if have is None:
        return [f"{language}: {name}: missing"]
    if have.fuzzy:
        return [f"{language}: {name}: marked fuzzy"]
    raw = list(have.string) if isinstance(have.string, tuple | list) else [have.string]
    forms = [form for form in raw if form]
    if not forms or len(forms) < len(raw):
        return [f"{language}: {name}: not translated"]
    sources = [str(s) for s in wanted.id] if isinstance(wanted.id, tuple | list) else [wanted.id]
    expected = set().union(*(_fields(s) for s in sources))
    out = []
    for form in forms:
        got = _fields(form)
        missing = expected - got - {"n"}
        if got - expected or missing:
            out.append(f"{language}: {name}: placeholders {sorted(got)} for {sorted(expected)}")
            break
    return out


def _name(message: Message) -> str:
    ident = message.id if isinstance(message.id, str) else message.id[0]
    return repr(ident if len(ident) <= 60 else ident[:57] + "...")


def _fields(text: str) -> set[str]:
    """The ``{names}`` `text` fills (a malformed format string counts as ``{!}``)."""
    try:
        return {name for _lit, name, _spec, _conv in string.Formatter().parse(text) if name}
    except ValueError:
        return {"!"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway.i18n.audit")
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("sync", help="extract the messages and update every catalog")
    adding = sub.add_parser("add", help="fill translations from a JSON list")
    adding.add_argument("file", type=Path)
    checking = sub.add_parser("check", help="print every problem; exit 1 if there is one")
    checking.add_argument("--only", help="just the messages used in files under this path")
    args = parser.parse_args(argv)
    if args.action == "sync":
        template = sync()
        print(f"{len(template)} messages; catalogs updated")
        return 0
    if args.action == "add":
        items = json.loads(args.file.read_text(encoding="utf-8"))
        print(f"{add(items)} translations set")
        return 0
    found = problems(only=args.only)
    for line in found:
        print(line)
    print(f"{len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

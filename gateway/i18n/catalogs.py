"""Loading the message catalogs, and choosing a language from a platform's hint.

`Catalogs` reads one compiled catalog per language on first use (the `.mo`
the build wrote; when it is missing or older than the `.po` beside it, as in
a checkout being edited, the `.po` is compiled in memory with Babel) and
hands out a `Translator` for it. English, the source language, needs no
catalog. `negotiate` maps a platform's language tag ("zh-hans", "es-419",
"en-US") to a shipped language, or None.
"""

from __future__ import annotations

import functools
import gettext
import io
import logging
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DOMAIN = "mnemo"
LOCALES_DIR = Path(__file__).resolve().parent / "locales"
DEFAULT_LANGUAGE = "en"
LANGUAGES = ("en", "zh", "es")
"""The shipped languages: English (the source), Simplified Chinese, Spanish."""
LANGUAGE_NAMES = {"en": "English", "zh": "简体中文", "es": "Español"}
"""Each language in its own words, for `/settings` and its buttons."""

_ALIASES = {
    # Traditional Chinese is not shipped: Simplified reads closer to it than English does
    "zh-hans": "zh", "zh-hant": "zh", "zh-cn": "zh", "zh-sg": "zh", "zh-tw": "zh",
    "zh-hk": "zh", "zh-mo": "zh", "chinese": "zh", "中文": "zh", "简体中文": "zh",
    "english": "en", "español": "es", "espanol": "es", "spanish": "es",
}  # fmt: skip


def N_(message: str) -> str:
    """Mark `message` for the catalogs without translating it (translated where shown)."""
    return message


def negotiate(tag: str | None) -> str | None:
    """The shipped language for a language tag or name ("zh-Hans", "es_ES", "中文"); None
    when none fits or there is no tag."""
    if not tag:
        return None
    norm = tag.strip().casefold().replace("_", "-")
    if norm in _ALIASES:
        return _ALIASES[norm]
    primary = norm.split("-", 1)[0]
    if primary in LANGUAGES:
        return primary
    return _ALIASES.get(primary)


class Translator:
    """One language's lines: `_` translates and fills a message, `n_` one with a count."""

    def __init__(self, language: str, translations: gettext.NullTranslations) -> None:
        self.language = language
        self._translations = translations

    def _(self, message: str, **values: Any) -> str:
        """`message` in this language, its ``{placeholders}`` filled from `values`."""
        return _filled(self._translations.gettext(message), message, values)

    def n_(self, singular: str, plural: str, n: int, **values: Any) -> str:
        """The form of `singular`/`plural` for `n` in this language; ``{n}`` is `n`."""
        source = singular if n == 1 else plural
        return _filled(self._translations.ngettext(singular, plural, n), source, {"n": n, **values})


def _filled(text: str, source: str, values: dict[str, Any]) -> str:
    if not values:
        return text
    try:
        return text.format(**values)
    except (KeyError, IndexError, ValueError):  # a broken translation: the English line
        log.error("translation of %r has placeholders of its own: %r", source, text)
        return source.format(**values)


class Catalogs:
    """The shipped catalogs, each loaded once, on first use."""

    def __init__(self, directory: Path = LOCALES_DIR) -> None:
        self._directory = directory
        self._loaded: dict[str, Translator] = {}
        self._lock = threading.Lock()

    def translator(self, language: str) -> Translator:
        """`language`'s translator (English for one not shipped)."""
        language = language if language in LANGUAGES else DEFAULT_LANGUAGE
        with self._lock:
            found = self._loaded.get(language)
            if found is None:
                found = Translator(language, self._load(language))
                self._loaded[language] = found
            return found

    def _load(self, language: str) -> gettext.NullTranslations:
        if language == DEFAULT_LANGUAGE:
            return gettext.NullTranslations()
        folder = self._directory / language / "LC_MESSAGES"
        po, mo = folder / f"{DOMAIN}.po", folder / f"{DOMAIN}.mo"
        if mo.exists() and (not po.exists() or mo.stat().st_mtime >= po.stat().st_mtime):
            return _translations(mo, mo.stat().st_mtime_ns)
        if not po.exists():
            log.error("no catalog for %s in %s: its lines are in English", language, folder)
            return gettext.NullTranslations()
        return _translations(po, po.stat().st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _translations(path: Path, mtime_ns: int) -> gettext.GNUTranslations:
    """The catalog at `path` (a `.mo`, or a `.po` compiled in memory), read once per
    version of the file in a process, however many `Catalogs` ask."""
    if path.suffix == ".mo":
        with path.open("rb") as compiled:
            return gettext.GNUTranslations(compiled)
    return gettext.GNUTranslations(io.BytesIO(compile_po(path)))


def compile_po(po: Path) -> bytes:
    """The `.mo` bytes of the catalog at `po` (fuzzy entries left out), compiled by Babel."""
    from babel.messages.mofile import write_mo  # only when a catalog must be compiled
    from babel.messages.pofile import read_po

    with po.open("rb") as source:
        catalog = read_po(source, domain=DOMAIN)
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()

"""The forms of a text that the rules read, and the invisible-character check.

Every rule runs on a normalised form ("view") of the text, never on the raw
text, so that look-alike letters, invisible characters and accents cannot
split or disguise a trigger word:

- `text`: NFKC (full-width and mathematical letters become plain ones), every
  Unicode Default_Ignorable_Code_Point removed (zero-width characters, bidi
  controls, variation selectors, the Hangul fillers U+115F/U+1160/U+3164/U+FFA0,
  tags…), every other format character (category Cf) removed, and the braille
  blank U+2800 turned into a space. Case is kept. Secrets are matched here.
- `plain`: `text` with every combining mark (Mn, Me) dropped after NFD, then
  recomposed (NFC). Rules for non-Latin languages (Russian) read this.
- `latin`: `plain` with each character that Unicode lists as confusable with
  an ASCII letter replaced by that letter (Cyrillic "о" → "o", Greek "ι" →
  "i"), using the table of the `confusable-homoglyphs` package (generated
  from Unicode's confusables.txt). Rules for English, German, Spanish and
  French read this.
- `compact`: `latin` with everything but letters and digits removed, so
  "i g n o r e", "I-G-N-O-R-E" and "忽 略" become single words. A few
  high-precision phrases (and the Chinese and Japanese rules) read this.

The folding steps themselves live in `memory_core.folding`, which the
`<memory-context>` scrubber shares.

The invisible-character check runs on the raw text: an invisible character
that is not a legitimate joiner is itself a finding, before any rule runs.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from memory_core.folding import char_class, drop_marks, latin_table, visible_text
from memory_core.safety.finding import INVISIBLE_UNICODE, Finding

_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad")
_BIDI = frozenset("\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Every character the invisible check looks at; the rest of the text is skipped.
_SUSPECTS = (
    "[\u00ad\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufe00-\ufe0f\ufeff"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)


@dataclass(frozen=True)
class Views:
    """The normalised forms of one text that the rules read (see the module docstring)."""

    text: str
    plain: str
    latin: str
    compact: str


def views(text: str) -> Views:
    """Every view of `text` (see the module docstring)."""
    visible = visible_text(text)
    if visible.isascii():
        plain = latin = visible
    else:
        plain = drop_marks(visible)
        latin = plain.translate(latin_table())
    compact = char_class(r"[^\pL\pN]+").sub("", latin)
    return Views(visible, plain, latin, compact)


def fold_literal(char: str, view: str) -> str:
    """One non-ASCII pattern character as it appears in `view`, so rules match their views."""
    folded = drop_marks(visible_text(char))
    return folded.translate(latin_table()) if view in ("latin", "compact") else folded


def _legit_joiner(text: str, i: int) -> bool:
    """ZWJ inside an emoji sequence, or ZWNJ between letters (Persian, Hindi…)."""
    before = text[i - 1] if i > 0 else ""
    after = text[i + 1] if i + 1 < len(text) else ""
    if not before or not after:
        return False
    if text[i] == "\u200d":
        emoji_before = unicodedata.category(before) in ("So", "Sk") or before == "\ufe0f"
        return emoji_before and unicodedata.category(after) == "So"
    if text[i] == "\u200c":
        return _joins_letters(before, after)
    return False


def _joins_letters(before: str, after: str) -> bool:
    # A ZWNJ may follow a virama or vowel sign (a mark) in Indic scripts.
    before_ok = before.isalpha() or unicodedata.category(before) in ("Mn", "Mc")
    return before_ok and after.isalpha() and not (before.isascii() or after.isascii())


def _smuggling_selector(text: str, i: int) -> bool:
    """A variation selector right after another one: bytes hidden in selectors."""
    return i > 0 and _is_selector(text[i - 1])


def _is_selector(ch: str) -> bool:
    code = ord(ch)
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF


def invisible_finding(text: str) -> Finding | None:
    """The first invisible character that is not a legitimate joiner, as a finding."""
    if text.isascii():
        return None
    for found in char_class(_SUSPECTS).finditer(text):
        i, ch = found.start(), found.group(0)
        if ch in _BIDI:
            pid = "bidi_control"
        elif ch in _ZERO_WIDTH and not _legit_joiner(text, i):
            pid = "zero_width_char"
        elif 0xE0000 <= ord(ch) <= 0xE007F:
            pid = "unicode_tag_char"  # tags can spell out hidden ASCII
        elif _is_selector(ch) and _smuggling_selector(text, i):
            pid = "variation_selector_run"
        else:
            continue
        return Finding(pid, INVISIBLE_UNICODE, f"U+{ord(ch):04X} at offset {i}")
    return None

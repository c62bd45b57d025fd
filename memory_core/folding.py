"""Text folded the way the safety scan reads it, so look-alikes match plain ASCII.

Folding applies NFKC (full-width and mathematical letters become plain ones),
removes every Unicode Default_Ignorable_Code_Point and every other format
character (category Cf), turns the braille blank U+2800 into a space, drops
combining marks, and maps each letter that Unicode lists as confusable with an
ASCII letter to that letter (the `confusable-homoglyphs` package's table,
generated from Unicode's confusables.txt). The safety scan's views
(`memory_core.safety.normalise`) are built from these steps, and the
`<memory-context>` scrubber (`memory_core.context`) finds its tags in text
folded by `fold_with_offsets`; this module imports nothing from either.
"""

from __future__ import annotations

import functools
import unicodedata

import re2
from confusable_homoglyphs import utils as confusable_data  # type: ignore[import-untyped]

# Default_Ignorable_Code_Point, from Unicode's DerivedCoreProperties.txt (the
# property is not in `unicodedata`). The set has been stable since Unicode 6.
_DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
# Characters that render as blank space but are not spaces to Unicode.
_BLANKS = "\u2800"


@functools.cache
def _drop_table() -> dict[int, str | None]:
    """str.translate table: default-ignorable code points removed, blanks made spaces."""
    table: dict[int, str | None] = {}
    for low, high in _DEFAULT_IGNORABLE:
        for code in range(low, high + 1):
            table[code] = None
    for blank in _BLANKS:
        table[ord(blank)] = " "
    return table


@functools.cache
def latin_table() -> dict[int, str]:
    """str.translate table: a non-ASCII letter → the ASCII letter it is confusable with."""
    table: dict[int, str] = {}
    for char, glyphs in confusable_data.load("confusables.json").items():
        if len(char) != 1 or char.isascii() or not char.isalpha():
            continue
        letters = [g["c"] for g in glyphs if len(g["c"]) == 1 and g["c"].isascii()]
        letters = [c for c in letters if c.isalpha()]
        if not letters:
            continue
        ascii_letter = letters[0]
        # Unicode's prototype for a capital I look-alike is "l"; keep it a capital.
        if ascii_letter == "l" and char.isupper():
            ascii_letter = "I"
        table[ord(char)] = ascii_letter
    return table


@functools.cache
def char_class(pattern: str) -> re2._Regexp[str]:
    """`pattern`, a character class, compiled once on RE2."""
    # Character classes only: a search is one linear pass.
    return re2.compile(pattern)


def drop_marks(text: str) -> str:
    """`text` without combining marks (Mn, Me), recomposed (NFC)."""
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", char_class(r"[\p{Mn}\p{Me}]+").sub("", decomposed))


def visible_text(text: str) -> str:
    """`text` after NFKC, without invisible and format characters, blanks made spaces."""
    stripped = unicodedata.normalize("NFKC", text).translate(_drop_table())
    if stripped.isascii():
        return stripped
    return char_class(r"\p{Cf}+").sub("", stripped)


@functools.lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    return drop_marks(visible_text(char)).translate(latin_table())


def fold_with_offsets(text: str) -> tuple[str, list[int]]:
    """`text` folded one character at a time as the `latin` view folds it, with offsets.

    The second value gives, for each character of the folded text (and one
    past its end), the offset in `text` it came from, so a match found in the
    folded text can be cut out of the original.
    """
    if text.isascii():
        return text, list(range(len(text) + 1))
    folded: list[str] = []
    offsets: list[int] = []
    for i, char in enumerate(text):
        piece = char if char.isascii() else _fold_char(char)
        folded.append(piece)
        offsets.extend([i] * len(piece))
    offsets.append(len(text))
    return "".join(folded), offsets

"""Cutting a long reply into messages that each fit a platform's limit.

A cut goes at the last paragraph break that leaves the part at least half full,
else at an earlier one when the paragraph after it then fits whole in the next
message, else at the last line break (half full, or earlier when the line after
it then fits whole), else the last space, and only inside a word when one word
is longer than a whole message. So a paragraph or a line that fits in one message
is cut only when it starts the part (a quoted memory entry, one paragraph, is shown
whole when it can be). It never falls inside a character (Python
strings hold a surrogate pair as one character), between "\\r" and "\\n", before a
combining mark or joiner, or inside a pair of regional indicators (a flag). A
``` code fence open at a cut is closed at the end of that part and reopened, with
its language tag, at the start of the next; room for both is reserved, so every
part fits. Whitespace at the cuts is trimmed (inside a code block only the line
break, so indentation survives).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

FENCE = "```"
CLOSE_FENCE = "\n" + FENCE
_FENCE_WORD = re.compile(r"```\w*\Z")
_TRAILING_TICKS = re.compile(r"`+\w*\Z")  # backticks at the end, and a word after them
_JOINERS = frozenset("\u200d\u200c")


def utf16_units(text: str) -> int:
    """The length Telegram counts: UTF-16 code units (an emoji outside the BMP is 2)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def split_message(
    text: str, max_units: int, units: Callable[[str], int] = utf16_units
) -> list[str]:
    """`text` cut into parts of at most `max_units` (as `units` counts); [] when blank."""
    if max_units < 1:
        raise ValueError("max_units must be at least 1")
    return split_rest(text.strip(), None, max_units, units)


def split_rest(
    rest: str, language: str | None, max_units: int, units: Callable[[str], int]
) -> list[str]:
    """`rest`, what follows a cut (with a fence of `language` open there, or None),
    cut into parts as `split_message` cuts a whole text."""
    parts: list[str] = []
    while rest:
        cut = next_cut(rest, language, max_units, units)
        if cut is None:
            parts.append(part_prefix(language, max_units, units) + rest)
            break
        parts.append(cut.part)
        rest = cut.remainder(rest)
        language = cut.language
    return [part for part in parts if part.strip()]


@dataclass(frozen=True)
class Cut:
    """One full part cut from the front of a text."""

    part: str  # the part as sent: its fence reopened at the start, closed at the end
    end: int  # the characters of the text the part took, before the whitespace dropped
    strip: str | None  # what is dropped after the cut (None: all whitespace)
    language: str | None  # the fence open at the cut, reopened in the next part

    def remainder(self, text: str) -> str:
        """What of `text` goes on into the next part."""
        return text[self.end :].lstrip(self.strip)


def part_prefix(language: str | None, max_units: int, units: Callable[[str], int]) -> str:
    """The start of a part that continues a fence of `language` ("" when none or no room)."""
    if language is None:
        return ""
    prefix = f"{FENCE}{language}\n"
    return "" if units(prefix) + units(CLOSE_FENCE) >= max_units else prefix


def next_cut(
    rest: str,
    language: str | None,
    max_units: int,
    units: Callable[[str], int],
    floor: int = 0,
) -> Cut | None:
    """The first part of `rest` (see `split_rest`); None when `rest` fits in one.

    The cut falls at `floor` characters of `rest` or later, so that text already
    shown stays in its part; with `floor` 0 this is `split_message`'s cut, and
    with any floor it is the same whenever that cut already falls there or later.
    """
    prefix = part_prefix(language, max_units, units)
    if units(prefix + rest) <= max_units:
        return None
    fences = units(prefix) + units(CLOSE_FENCE) < max_units
    end, line_cut, body, open_language = _next_part(rest, prefix, max_units, 0, units, floor)
    if open_language is not None and fences and units(body + CLOSE_FENCE) > max_units:
        # cut again, leaving room to close the fence
        reserve = units(CLOSE_FENCE)
        end, line_cut, body, open_language = _next_part(
            rest, prefix, max_units, reserve, units, floor
        )
    if not fences:
        open_language = None
    if open_language is None:
        return Cut(body, end, None, None)
    # keep the indentation of code; drop only the cut's line break or spaces
    return Cut(body + CLOSE_FENCE, end, "\r\n" if line_cut else " \t", open_language)


def _next_part(
    rest: str,
    prefix: str,
    max_units: int,
    reserve: int,
    units: Callable[[str], int],
    floor: int,
) -> tuple[int, bool, str, str | None]:
    """The cut in `rest` (and whether at a line), the part's body and its open fence."""
    budget = max_units - units(prefix) - reserve
    limit = fitting_prefix(rest, budget, units)
    cut, line_cut = _best_cut(rest, limit, min(floor, limit), lambda t: units(t) <= budget)
    body = prefix + rest[:cut].rstrip()
    return cut, line_cut, body, open_fence(body)


def open_fence(text: str) -> str | None:
    """The language tag ("" for none) of a ``` fence still open at the end of `text`."""
    language: str | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped.startswith(FENCE):
            continue
        if language is None:
            language = stripped[len(FENCE) :].strip().split(" ")[0].strip("`")
        elif not stripped.strip("`"):
            language = None
    return language


def held_back(view: str) -> str:
    """`view` without what a streamed part must not show yet: a fence line still being
    written (```` ``` ```` and a language that may not be whole) and trailing backticks
    with any word right after them (perhaps a fence starting), so that no cut ever
    falls inside a fence marker."""
    view = view.rstrip()
    line_start = view.rfind("\n") + 1
    if view.startswith(FENCE, line_start):
        view = view[:line_start]
    return _TRAILING_TICKS.sub("", view).rstrip()


def fitting_prefix(text: str, budget: int, units: Callable[[str], int]) -> int:
    """The most characters of `text` (at least one) whose units fit in `budget`."""
    low, high = 1, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if units(text[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


def _best_cut(text: str, limit: int, floor: int, fits: Callable[[str], bool]) -> tuple[int, bool]:
    """Where to cut `text` within its first `limit` characters and at `floor` or
    later, and whether at a line; `fits`: whether a piece fits in one part."""
    window = text[:limit]
    low = max(1, floor)
    half = max(low, limit // 2)
    if limit < len(text) and text[limit] in "\r\n":
        return limit, True  # the window ends exactly at a line
    for separator in ("\n\n", "\n"):
        at = window.rfind(separator, half)
        if at >= half:
            return at, True
        at = window.rfind(separator, low)  # earlier, if that keeps the next piece whole
        if at >= low and fits(_piece_after(text, at, separator)):
            return at, True
    space = max(window.rfind(" ", half), window.rfind("\t", half))
    if space >= half:
        return space, False
    line = window.rfind("\n", low)
    if line >= low:
        return line, True
    space = max(window.rfind(" ", low), window.rfind("\t", low))
    if space >= low:
        return space, False
    return _safe_hard_cut(text, limit, low), False


def _piece_after(text: str, at: int, separator: str) -> str:
    """The paragraph or line (as `separator` says) that starts after the break at `at`."""
    start = at + len(separator)
    end = text.find(separator, start)
    return text[start : end if end >= 0 else len(text)].strip()


def _safe_hard_cut(text: str, limit: int, low: int) -> int:
    """`limit`, moved back (not below `low`) so the cut splits no "\\r\\n", mark
    sequence, flag or run of backticks."""
    cut = limit
    while cut > low and _inseparable(text, cut):
        cut -= 1
    return cut if not _inseparable(text, cut) else limit


def _inseparable(text: str, cut: int) -> bool:
    if cut >= len(text):
        return False
    before, after = text[cut - 1], text[cut]
    if before == "\r" and after == "\n":
        return True
    if before == "`" and after == "`":  # inside a run of backticks: perhaps a fence
        return True
    if after.isalnum() and _FENCE_WORD.search(text, max(0, cut - 40), cut):
        return True  # inside a fence's language word
    if before in _JOINERS or after in _JOINERS or _is_extender(after):
        return True
    if _is_regional(after) and _is_regional(before):
        run = 0
        while cut - run - 1 >= 0 and _is_regional(text[cut - run - 1]):
            run += 1
        return run % 2 == 1
    return False


def _is_extender(char: str) -> bool:
    """A mark, variation selector or skin tone that belongs to the character before."""
    code = ord(char)
    return (
        unicodedata.combining(char) != 0
        or unicodedata.category(char) in ("Mn", "Me", "Mc")
        or 0xFE00 <= code <= 0xFE0F
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xE0020 <= code <= 0xE007F
    )


def _is_regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF

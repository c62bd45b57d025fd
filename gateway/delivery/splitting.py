"""Cutting a long reply into messages that each fit a platform's limit.

A cut goes at the last paragraph break that leaves the part at least half full,
else the last line break, else the last space, and only inside a word when one
word is longer than a whole message. It never falls inside a character (Python
strings hold a surrogate pair as one character), between "\\r" and "\\n", before a
combining mark or joiner, or inside a pair of regional indicators (a flag). A
``` code fence open at a cut is closed at the end of that part and reopened, with
its language tag, at the start of the next; room for both is reserved, so every
part fits. Whitespace at the cuts is trimmed (inside a code block only the line
break, so indentation survives).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

FENCE = "```"
CLOSE_FENCE = "\n" + FENCE
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
    rest = text.strip()
    parts: list[str] = []
    language: str | None = None  # the info string of a fence open where the last part ended
    while rest:
        prefix = f"{FENCE}{language}\n" if language is not None else ""
        if units(prefix) + units(CLOSE_FENCE) >= max_units:
            prefix = ""  # no room for fences: plain cuts
        if units(prefix + rest) <= max_units:
            parts.append(prefix + rest)
            break
        fences = units(prefix) + units(CLOSE_FENCE) < max_units
        cut, line_cut, body, language = _next_part(rest, prefix, max_units, 0, units)
        if language is not None and fences and units(body + CLOSE_FENCE) > max_units:
            # cut again, leaving room to close the fence
            reserve = units(CLOSE_FENCE)
            cut, line_cut, body, language = _next_part(rest, prefix, max_units, reserve, units)
        if not fences:
            language = None
        parts.append(body + CLOSE_FENCE if language is not None else body)
        rest = rest[cut:]
        if language is None:
            rest = rest.lstrip()
        else:  # keep the indentation of code; drop only the cut's line break or spaces
            rest = rest.lstrip("\r\n") if line_cut else rest.lstrip(" \t")
    return [part for part in parts if part.strip()]


def _next_part(
    rest: str, prefix: str, max_units: int, reserve: int, units: Callable[[str], int]
) -> tuple[int, bool, str, str | None]:
    """The cut in `rest` (and whether at a line), the part's body and its open fence."""
    limit = _fitting_prefix(rest, max_units - units(prefix) - reserve, units)
    cut, line_cut = _best_cut(rest, limit)
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


def _fitting_prefix(text: str, budget: int, units: Callable[[str], int]) -> int:
    """The most characters of `text` (at least one) whose units fit in `budget`."""
    low, high = 1, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if units(text[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


def _best_cut(text: str, limit: int) -> tuple[int, bool]:
    """Where to cut `text` within its first `limit` characters, and whether at a line."""
    window = text[:limit]
    half = max(1, limit // 2)
    if limit < len(text) and text[limit] in "\r\n":
        return limit, True  # the window ends exactly at a line
    for separator, start in (("\n\n", half), ("\n", half)):
        at = window.rfind(separator, start)
        if at >= start:
            return at, True
    space = max(window.rfind(" ", half), window.rfind("\t", half))
    if space >= half:
        return space, False
    line = window.rfind("\n", 1)
    if line >= 1:
        return line, True
    space = max(window.rfind(" ", 1), window.rfind("\t", 1))
    if space >= 1:
        return space, False
    return _safe_hard_cut(text, limit), False


def _safe_hard_cut(text: str, limit: int) -> int:
    """`limit`, moved back so the cut splits no "\\r\\n", mark sequence or flag."""
    cut = limit
    while cut > 1 and _inseparable(text, cut):
        cut -= 1
    return cut if not _inseparable(text, cut) else limit


def _inseparable(text: str, cut: int) -> bool:
    if cut >= len(text):
        return False
    before, after = text[cut - 1], text[cut]
    if before == "\r" and after == "\n":
        return True
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

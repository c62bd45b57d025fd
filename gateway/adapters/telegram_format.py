"""The model's Markdown as Telegram text plus message entities.

Telegram shows formatting through entities (bold, italic, code, pre with a
language, text links, blockquotes...) whose offsets and lengths count UTF-16
code units. The conversion is telegramify-markdown's (a CommonMark parser),
not ours: `render` only adapts its result to plain dicts, the form the Bot API
takes, so this module needs no Telegram client import.

Rendering changes the length: markup disappears (``**x**`` is 1 unit, not 5)
but headings gain a marker and list items a bullet, so a part the splitter cut
to 4,096 units of Markdown is usually shorter once rendered, rarely longer (a
part made only of headings or list items). The adapter sends a rendered text
over the limit as plain text, which Telegram accepts when the source fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import telegramify_markdown

MAX_UNITS = 4096


@dataclass(frozen=True)
class Rendered:
    """A message ready for the Bot API: its text and its entities (as API dicts)."""

    text: str
    entities: tuple[dict[str, Any], ...]

    @property
    def units(self) -> int:
        """The text's length in UTF-16 code units."""
        return utf16_units(self.text)


def utf16_units(text: str) -> int:
    """Length in UTF-16 code units, the unit Telegram counts in."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def render(markdown: str) -> Rendered:
    """Markdown to text and entities; `markdown` itself when rendering leaves nothing."""
    text, entities = telegramify_markdown.convert(markdown)
    if not text.strip():
        return Rendered(markdown, ())
    return Rendered(text, tuple(entity.to_dict() for entity in entities))

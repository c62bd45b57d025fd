"""The model's Markdown as Telegram text plus message entities.

Telegram shows formatting through entities (bold, italic, code, pre with a
language, text links, blockquotes...) whose offsets and lengths count UTF-16
code units. The conversion is telegramify-markdown's (a CommonMark parser),
not ours: `render` only adapts its result to plain dicts, the form the Bot API
takes, so this module needs no Telegram client import.

The text is Markdown only, never HTML. CommonMark reads ``<b and c>`` in
"a<b and c>d" as a raw HTML tag and ``&amp;`` as a character reference, and
the converter drops raw HTML, so the person would see "ad". Before converting,
`markdown_only` backslash-escapes exactly the ``<`` that open raw HTML and the
``&`` that open character references (the parser says which), so they show as
written; code, autolinks and everything else keep their Markdown meaning.

Rendering changes the length: markup disappears (``**x**`` is 1 unit, not 5)
but headings gain a marker and list items a bullet, so a part the splitter cut
to 4,096 units of Markdown is usually shorter once rendered, rarely longer (a
part made only of headings or list items). The adapter sends a rendered text
over the limit as plain text, which Telegram accepts when the source fits.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import pyromark
import telegramify_markdown
from telegramify_markdown.converter import STANDARD_OPTIONS, _escape_latex

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
    # The converter turns LaTeX into Unicode before it parses; doing that step
    # first lets markdown_only see the very text the converter's parser reads.
    source = markdown_only(latex_to_unicode(markdown))
    text, entities = telegramify_markdown.convert(source, latex_escape=False)
    if not text.strip():
        return Rendered(markdown, ())
    return Rendered(text, tuple(entity.to_dict() for entity in entities))


def latex_to_unicode(markdown: str) -> str:
    """The converter's LaTeX step (``\\[…\\]`` and ``\\(…\\)`` to Unicode math), where an
    escaped backslash (``\\\\``, a backslash shown) neither opens nor closes LaTeX: as in
    CommonMark, the backslashes of a run pair up from the left, so ``\\\\(`` is a
    backslash and a parenthesis (`gateway.delivery.literal` relies on it)."""
    if "\\\\" not in markdown:
        return _escape_latex(markdown)
    mark = next(chr(c) for c in range(0xE000, 0xF900) if chr(c) not in markdown)
    converted = _escape_latex(markdown.replace("\\\\", mark))
    return converted.replace(mark, "\\\\")


def markdown_only(markdown: str) -> str:
    """`markdown` with its raw HTML and character references escaped, so both show as written.

    Escaping an HTML opener makes the rest of that HTML Markdown again, which
    can open new HTML or a code span around later text, so a round escapes the
    openers in order only up to the first whose HTML holds something that could
    (see `_html_openers`), and the text is parsed again for the next round. An
    escape that landed inside code, where its backslash would show, is taken
    back (its ``<`` is code now, not HTML) unless all of the round's did: then
    no backslash can stop that HTML without standing in code (a code span
    across an HTML block's lines), and one backslash shown loses less than a
    block dropped. This ends: every round keeps at least one escape for good,
    and an escaped ``<`` never opens anything again. Character references are
    escaped last, once no HTML is left; that changes nothing else. After a few
    careful rounds every opener found is escaped at once, so that a text made
    of hundreds of HTML blocks costs a few parses, not hundreds.
    """
    source = markdown.encode("utf-8", "surrogatepass")
    events = _parse(source)
    rounds = 0
    while openers := _html_openers(source, events, careful=rounds < _CAREFUL_ROUNDS):
        rounds += 1
        source = _insert_backslashes(source, openers)
        events = _parse(source)
        # Where each inserted backslash now stands: the i-th moved i bytes on.
        inserted = [offset + i for i, offset in enumerate(openers)]
        literal = _literal_ranges(events)
        misplaced = [p for p in inserted if _in_ranges(p, literal)]
        if misplaced and len(misplaced) < len(inserted):
            source = b"".join(source[a + 1 : b] for a, b in pairwise([-1, *misplaced, len(source)]))
            events = _parse(source)
    source = _insert_backslashes(source, _references(source, events))
    return source.decode("utf-8", "surrogatepass")


# (event, {"start": byte, "end": byte}) pairs, as pyromark gives them.
_Events = tuple[tuple[Any, Any], ...]


def _parse(source: bytes) -> _Events:
    """The parser's events with their UTF-8 byte ranges, read as the converter reads."""
    text = source.decode("utf-8", "surrogatepass")
    return tuple(pyromark.events_with_range(text, options=STANDARD_OPTIONS))


def _insert_backslashes(source: bytes, offsets: list[int]) -> bytes:
    """`source` with a backslash before each of the sorted UTF-8 `offsets`."""
    bounds = [0, *offsets, len(source)]
    return b"\\".join(source[a:b] for a, b in pairwise(bounds))


def _html_openers(source: bytes, events: _Events, *, careful: bool) -> list[int]:
    """UTF-8 offsets of the ``<`` that open raw HTML, in order, as far as one round goes.

    Escaping one leaves the parse of the text before it as it was, and of the
    text after it too if the HTML held no backtick, bracket, ``<``, ``$``,
    ``~`` or backslash; a `careful` round ends with the first that did. Also
    the ``$`` of inline math closed right before a digit ("$10 or $20"): the
    converter reads those as prices and escapes them itself, which would bring
    the text between them back to its parser unescaped.
    """
    offsets: list[int] = []
    for event, span in events:
        if not isinstance(event, dict):
            continue
        if "InlineHtml" in event or event.get("Start") == "HtmlBlock":
            # An HTML block's range may begin with indentation; its tag opens at the first "<".
            opener = source.index(b"<", span["start"])
            offsets.append(opener)
            held = source[opener + 1 : span["end"]]
        elif "InlineMath" in event and source[span["end"] : span["end"] + 1].isdigit():
            offsets += (span["start"], span["end"] - 1)
            held = b"$"
        else:
            continue
        if careful and _ACTIVE & set(held):
            break
    return offsets


# What can start or end a code span, code block, HTML, math or a link.
_ACTIVE = frozenset(b"`<$[]~\\")
_CAREFUL_ROUNDS = 8


def _references(source: bytes, events: _Events) -> list[int]:
    """Sorted UTF-8 offsets of the ``&`` of character references (``&amp;``) in the text."""
    offsets = []
    for event, span in events:
        if isinstance(event, dict) and "Text" in event:
            written = source[span["start"] : span["end"]]
            if written[:1] == b"&" and written[-1:] == b";" and event["Text"] != written.decode():
                offsets.append(span["start"])
    return offsets


def _literal_ranges(events: _Events) -> list[tuple[int, int]]:
    """The byte ranges of code, math and autolinks, where a backslash is shown, in order."""
    return sorted((span["start"], span["end"]) for event, span in events if _is_literal(event))


def _in_ranges(offset: int, ranges: list[tuple[int, int]]) -> bool:
    """Whether `offset` lies in one of the sorted, non-overlapping `ranges`."""
    i = bisect_right(ranges, offset, key=lambda r: r[0]) - 1
    return i >= 0 and ranges[i][0] <= offset < ranges[i][1]


def _is_literal(event: Any) -> bool:
    if not isinstance(event, dict):
        return False
    if {"Code", "InlineMath", "DisplayMath"} & event.keys():
        return True
    start = event.get("Start")
    if isinstance(start, dict) and "CodeBlock" in start:
        return True
    link = start.get("Link") if isinstance(start, dict) else None
    return isinstance(link, dict) and link.get("link_type") in ("Autolink", "Email")

"""Text quoted to a person exactly as written, inside a reply that is Markdown.

A reply is Markdown source that each adapter renders: Telegram through a CommonMark
parser (`gateway.adapters.telegram_format`), Discord by its own rules. A memory
entry the person is asked to approve, and the words of theirs it is compared with,
must show as stored, so `literal` escapes such a text for both at once:

- a backslash before each character that can start markup inside a line,
  ``\\ ` * _ ~ | < > $ &`` (CommonMark shows any escaped ASCII punctuation as
  itself, Discord any escaped character but a letter, digit or space), and before
  a ``(`` right after a ``]``, so no ``[text](url)`` becomes a link. Never before
  ``[`` or ``(`` otherwise: Telegram's converter reads ``\\[…\\]`` and ``\\(…\\)`` as
  LaTeX before it parses the Markdown (and takes no escaped backslash for one);
- a web address (``http``, ``https``, ``steam``: the ones Discord links by itself) goes
  between ``<`` and ``>``, unescaped: inside an address Discord would show a
  backslash, and both platforms show ``<address>`` as the address alone;
- every further line of a text of several lines starts with `INDENT`, no-break
  spaces that Markdown keeps (the line is never blank, never a line start, and
  plainly part of the quote); a block marker that starts a line (``#``, ``-``, ``+``,
  ``=``, ``1.``) is escaped too, so the text may stand at the start of a line.

What Markdown still changes: spaces at the end of a line inside the text are
dropped. A platform that shows the Markdown source (the console) shows the
backslashes. ``@everyone`` is broken by the Discord adapter wherever it appears.
"""

from __future__ import annotations

import re

INDENT = "\u00a0" * 4
"""What starts each further line of a quoted text of several lines."""

_INLINE = re.compile(r"[\\`*_~|<>$&]|(?<=\])\(")
_ADDRESS = re.compile(r"(?:https?|steam)://[^\s<>\\]*[^\s<>\\.,:;\"')\]]")
_LINE_START = re.compile(r"^([ \t]*)(?:([#+=-])|([0-9]{1,9})(\.))")
_LIST_ITEM = re.compile(r"^([0-9]{1,9})\.")


def literal(text: str) -> str:
    """`text` as Markdown that Telegram and Discord both show exactly as written."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    escaped = [_LINE_START.sub(_escape_marker, _escaped(line)) for line in lines]
    return ("\n" + INDENT).join(escaped)


def _escaped(line: str) -> str:
    """One line: its web addresses between angle brackets, the rest escaped."""
    parts, at = [], 0
    for address in _ADDRESS.finditer(line):
        parts += [_INLINE.sub(r"\\\g<0>", line[at : address.start()]), f"<{address[0]}>"]
        at = address.end()
    parts.append(_INLINE.sub(r"\\\g<0>", line[at:]))
    return "".join(parts)


def unnumbered(line: str) -> str:
    """`line` with a leading "12." escaped, so that Markdown shows the number as written
    rather than as an ordered list (which renumbers from the first item)."""
    return _LIST_ITEM.sub(r"\1\\.", line, count=1)


def _escape_marker(match: re.Match[str]) -> str:
    space, marker, number, dot = match.groups()
    if marker is not None:
        return f"{space}\\{marker}"
    return f"{space}{number}\\{dot}"

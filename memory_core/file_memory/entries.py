"""The `§`-delimited entry format of MEMORY.md and USER.md.

A file is a list of entries joined by ``"\\n§\\n"`` (a line holding only `§`).
Reading splits on that full delimiter, strips each entry and drops empty ones
and exact duplicates (the first is kept). An entry may span lines and may hold
a `§` inside a line; it may not hold a line that is only `§`, since that line
is the delimiter.

On disk the joined text is followed by one newline (an empty list is an empty
file). `is_canonical()` is the drift check: does the text on disk read back and
re-join to itself, allowing for whitespace around the whole file?
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from memory_core.errors import InvalidEntryError

DELIMITER = "\n§\n"
SECTION_SIGN = "§"


def parse_entries(text: str) -> list[str]:
    """Split file text into entries: stripped, non-empty, duplicates dropped."""
    seen: set[str] = set()
    entries: list[str] = []
    for raw in text.split(DELIMITER):
        entry = raw.strip()
        if entry and entry not in seen:
            seen.add(entry)
            entries.append(entry)
    return entries


def join_entries(entries: Iterable[str]) -> str:
    """The entries joined by the delimiter; its length is the store's usage."""
    return DELIMITER.join(entries)


def file_text(entries: Sequence[str]) -> str:
    """What is written to disk: the joined entries and a final newline."""
    return join_entries(entries) + "\n" if entries else ""


def usage(entries: Iterable[str]) -> int:
    """Characters the entries take in the store (the length of the joined text)."""
    return len(join_entries(entries))


def normalise_entry(content: str) -> str:
    """Clean new content into one entry, or raise `InvalidEntryError`.

    Line endings become ``\\n`` and surrounding whitespace is stripped. Empty
    content, content that is not valid Unicode (lone surrogates, which JSON can
    carry) and content holding a line that is only `§` are refused.
    """
    entry = content.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not entry:
        raise InvalidEntryError("content is empty")
    try:
        entry.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidEntryError(
            f"content is not valid Unicode (code point U+{ord(entry[exc.start]):04X} "
            f"at offset {exc.start})"
        ) from None
    if any(line.strip() == SECTION_SIGN for line in entry.split("\n")):
        raise InvalidEntryError(
            "content holds a line that is only '§', which separates entries; "
            "write it as separate entries instead"
        )
    return entry


def is_canonical(text: str) -> bool:
    """True when `text` re-joins to itself after parsing (whitespace around the file aside)."""
    return join_entries(parse_entries(text)) == text.strip()

"""Snippets: the text of a matching message, cut to a window, matches marked.

Word matches come from FTS5's `highlight()` with the word index's own
tokenizer, so stemmed forms ("painted" for "paint") are marked as the index
matched them; substring matches (emoji) and CJK terms (the bigrams the word
index holds, which `highlight()` on the plain text cannot see) are found in
Python. Overlapping and adjacent spans are merged before the markers are
inserted, so markers never nest and a run of matching bigrams is one mark.

What one message may cost is bounded, however long it is or however often a
word repeats in it (`highlight()` is quadratic in the number of matches):

- at most `FETCH_BYTES` of a message are read (incremental blob I/O: the
  rest of a 50 MB message is never loaded);
- `highlight()` only ever sees a window of `WINDOW_CHARS` characters, copied
  into a private in-memory FTS5 table (the reader's connection is read-only);
- in a longer message the window starts at the first match, looked for
  piece by piece in the first `SCAN_CHARS` characters, and one search scans
  at most `SCAN_BUDGET` characters in all; past that, the snippet shows the
  start of the message.

NUL and the two sentinel characters are replaced by spaces (separators to
the tokenizer, like NUL) in the copy `highlight()` sees, so they can neither
cut its output short nor pass for a marker: spans stay where the words are.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Sequence

from memory_core.sessions.models import MATCH_END, MATCH_START
from memory_core.sessions.query import QueryTerm, TermKind, has_cjk, word_index_expression
from memory_core.sessions.sql.search import INSERT_SCRATCH_TEXT

SNIPPET_CHARS = 320
WINDOW_CHARS = 4096  # what highlight() sees of one message
SCAN_CHARS = 1 << 18  # how far into a message the first match is looked for
SCAN_BUDGET = 4 * SCAN_CHARS  # how much all the messages of one search may scan together
FETCH_BYTES = 4 * (SCAN_CHARS + WINDOW_CHARS)  # how much of a message is read at all
WORD_TOKENIZER = "porter unicode61 remove_diacritics 2"  # the word index's (schema.py)
_LEAD = 80  # characters shown before the first match
_PIECE = WINDOW_CHARS - SNIPPET_CHARS  # a match in a piece leaves a snippet's width after it
_OVERLAP = 64  # pieces overlap, so a phrase across two pieces is found
_OPEN, _CLOSE = "\x01", "\x02"  # sentinels asked of highlight(), removed again below
_SAFE = str.maketrans("\x00\x01\x02", "   ")
_SEPARATOR = re.compile(r"\W")
_PER_THREAD = threading.local()  # each thread's scratch connection, made on first use


def highlighted_texts(
    conn: sqlite3.Connection, message_ids: Sequence[int], terms: Sequence[QueryTerm]
) -> dict[int, str]:
    """Marked snippet text for each message id (only ids that exist).

    The windows of all the messages go through `highlight()` in one
    statement, not one statement each.
    """
    if not message_ids:
        return {}
    marks = ",".join("?" * len(message_ids))
    found = conn.execute(
        f"SELECT id FROM messages WHERE id IN ({marks}) ORDER BY id", tuple(message_ids)
    )
    heads: list[tuple[int, str, bool]] = []
    for (message_id,) in found.fetchall():
        try:
            head, size = _head(conn, message_id)
        except sqlite3.OperationalError:  # deleted since it matched
            continue
        heads.append((message_id, decode_head(head), size > len(head)))
    return mark_heads(heads, terms)


def decode_head(head: bytes) -> str:
    """The text of a message's first `FETCH_BYTES` (a character cut at the end is dropped)."""
    return head.decode("utf-8", errors="ignore")


def mark_heads(
    heads: Sequence[tuple[int, str, bool]], terms: Sequence[QueryTerm]
) -> dict[int, str]:
    """Marked snippet text for each (message id, head of its text, whether it goes on).

    The heads are taken in the order given, which decides what `SCAN_BUDGET`
    is spent on first: the stores give them in ascending id order.
    """
    literals, words = _split_terms(terms)
    windows: list[tuple[int, str, int, bool]] = []  # message id, text, window start, cut
    with _Scratch(word_index_expression(words)) as scratch:
        for message_id, content, cut in heads:
            start = _window_start(scratch, content, literals)
            windows.append((message_id, content, start, cut))
        texts = [content[start : start + WINDOW_CHARS] for _, content, start, _ in windows]
        marked = scratch.spans_of(texts) if scratch.expression else [[] for _ in texts]
    out: dict[int, str] = {}
    for (message_id, content, start, cut), window, spans in zip(
        windows, texts, marked, strict=True
    ):
        spans = spans + _literal_spans(window, literals)
        out[message_id] = render(content, [(a + start, b + start) for a, b in spans], cut=cut)
    return out


def _split_terms(terms: Sequence[QueryTerm]) -> tuple[list[str], list[QueryTerm]]:
    """Substrings to mark in Python (emoji, every piece of a CJK term); terms for highlight()."""
    literals: list[str] = []
    words: list[QueryTerm] = []
    for term in terms:
        if term.kind is TermKind.LITERAL:
            literals.append(term.text)
        elif has_cjk(term.text):
            literals.extend(term.text.split(" "))
        else:
            words.append(term)
    return literals, words


def _head(conn: sqlite3.Connection, message_id: int) -> tuple[bytes, int]:
    """The first `FETCH_BYTES` of a message's text (UTF-8), and its whole length in bytes."""
    with conn.blobopen("messages", "content", message_id, readonly=True) as blob:
        return blob.read(FETCH_BYTES), len(blob)


class _Scratch:
    """A private in-memory FTS5 table with the word index's tokenizer, emptied after use.

    Each thread keeps its own (opening one costs about a millisecond, a
    search's whole budget); readers are long-lived pool threads.
    """

    def __init__(self, expression: str) -> None:
        self.expression = expression
        conn = getattr(_PER_THREAD, "conn", None)
        if conn is None:
            conn = sqlite3.connect(":memory:", isolation_level=None)
            conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(content, tokenize='{WORD_TOKENIZER}')")
            _PER_THREAD.conn = conn
        self._conn: sqlite3.Connection = conn
        self._rowid = 0
        self.budget = SCAN_BUDGET  # characters `matches` may still scan

    def __enter__(self) -> _Scratch:
        self._conn.execute("DELETE FROM t")
        return self

    def __exit__(self, *exc: object) -> None:
        self._conn.execute("DELETE FROM t")

    def _add(self, text: str) -> int:
        self._rowid += 1
        self._conn.execute(INSERT_SCRATCH_TEXT.sqlite, (self._rowid, text.translate(_SAFE)))
        return self._rowid

    def matches(self, text: str) -> bool:
        """Whether the query's words occur in `text` (which counts against the budget)."""
        self.budget -= len(text)
        rowid = self._add(text)
        row = self._conn.execute(
            "SELECT 1 FROM t WHERE t MATCH ? AND rowid = ?", (self.expression, rowid)
        )
        return row.fetchone() is not None

    def spans_of(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Where in each of `texts` the query's words occur, as `highlight()` marks them."""
        first = self._rowid + 1
        for text in texts:
            self._add(text)
        rows = self._conn.execute(
            "SELECT rowid, highlight(t, 0, ?, ?) FROM t WHERE t MATCH ? AND rowid >= ?",
            (_OPEN, _CLOSE, self.expression, first),
        )
        spans = {rowid: _sentinel_spans(marked or "") for rowid, marked in rows}
        return [spans.get(first + n, []) for n in range(len(texts))]


def _window_start(scratch: _Scratch, content: str, literals: Sequence[str]) -> int:
    """Where the highlighted window of `content` begins: at its first match, roughly."""
    if len(content) <= WINDOW_CHARS:
        return 0
    limit = min(len(content), SCAN_CHARS)
    first_literal = _first_literal(content[:limit], literals)
    if first_literal is not None:
        limit = first_literal
    if scratch.expression:
        for start in range(0, limit, _PIECE):
            if scratch.budget <= 0:
                break
            piece_start = _boundary(content, start)
            if scratch.matches(
                content[piece_start : _boundary(content, start + _PIECE + _OVERLAP)]
            ):
                return piece_start
    if first_literal is not None:
        return _boundary(content, max(0, first_literal - 2 * _LEAD))
    return 0


def _boundary(content: str, position: int) -> int:
    """`position`, moved just past a nearby separator so that no word is cut in two."""
    if position <= 0 or position >= len(content):
        return max(0, min(position, len(content)))
    found = _SEPARATOR.search(content, position - 1, position + _OVERLAP)
    return found.end() if found else position


def _first_literal(content: str, literals: Sequence[str]) -> int | None:
    found = [m.start() for t in literals if (m := re.search(re.escape(t), content, re.I))]
    return min(found, default=None)


def _sentinel_spans(text: str) -> list[tuple[int, int]]:
    """Spans in the unmarked text, from a string marked with the sentinels."""
    spans: list[tuple[int, int]] = []
    removed = 0  # sentinels before the current position
    opened = text.find(_OPEN)
    while opened >= 0:
        closed = text.find(_CLOSE, opened + 1)
        if closed < 0:
            break
        spans.append((opened - removed, closed - removed - 1))
        removed += 2
        opened = text.find(_OPEN, closed + 1)
    return spans


def _literal_spans(content: str, literals: Sequence[str]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for literal in literals:
        for found in re.finditer(re.escape(literal), content, re.IGNORECASE):
            spans.append(found.span())
    return spans


def merge_spans(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def render(
    content: str,
    spans: Sequence[tuple[int, int]],
    width: int = SNIPPET_CHARS,
    *,
    cut: bool = False,
) -> str:
    """Cut `content` to about `width` characters around the first match, marking matches.

    `cut` says that the message goes on after `content` (it ends in "…").
    """
    spans = merge_spans(spans)
    begin = 0
    if len(content) > width and spans:
        begin = max(0, min(spans[0][0] - _LEAD, len(content) - width))
    end = min(len(content), begin + width)
    parts: list[str] = ["…"] if begin > 0 else []
    cursor = begin
    for start, stop in spans:
        if stop <= begin or start >= end:
            continue
        start, stop = max(start, begin), min(stop, end)
        parts += [content[cursor:start], MATCH_START, content[start:stop], MATCH_END]
        cursor = stop
    parts.append(content[cursor:end])
    if end < len(content) or cut:
        parts.append("…")
    return "".join(parts)

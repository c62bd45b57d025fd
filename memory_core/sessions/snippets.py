"""Snippets: the text of a matching message, cut to a window, matches marked.

Word matches come from FTS5's `highlight()` on the word index, so stemmed
forms ("painted" for "paint") are marked as the index matched them;
substring matches (CJK text, emoji) are found in Python.
Overlapping spans are merged before the markers are inserted, so markers
never nest.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

from memory_core.sessions.models import MATCH_END, MATCH_START
from memory_core.sessions.query import QueryTerm, TermKind, word_index_expression
from memory_core.sessions.schema import WORD_INDEX

SNIPPET_CHARS = 320
_LEAD = 80  # characters shown before the first match
_OPEN, _CLOSE = "\x01", "\x02"  # sentinels asked of highlight(), removed again below


def highlighted_texts(
    conn: sqlite3.Connection, message_ids: Sequence[int], terms: Sequence[QueryTerm]
) -> dict[int, str]:
    """Marked snippet text for each message id (only ids that exist)."""
    if not message_ids:
        return {}
    marks = ",".join("?" * len(message_ids))
    rows = conn.execute(
        f"SELECT id, content, role FROM messages WHERE id IN ({marks})", tuple(message_ids)
    ).fetchall()
    word_spans = _word_spans(conn, message_ids, terms)
    literals = [t.text for t in terms if t.kind is TermKind.LITERAL]
    out: dict[int, str] = {}
    for message_id, content, _role in rows:
        spans = list(word_spans.get(message_id, ()))
        spans += _literal_spans(content, literals)
        out[message_id] = render(content, spans)
    return out


def _word_spans(
    conn: sqlite3.Connection, message_ids: Sequence[int], terms: Sequence[QueryTerm]
) -> dict[int, list[tuple[int, int]]]:
    expression = word_index_expression(terms)
    if not expression:
        return {}
    marks = ",".join("?" * len(message_ids))
    rows = conn.execute(
        f"SELECT rowid, highlight({WORD_INDEX}, 0, ?, ?) FROM {WORD_INDEX} "
        f"WHERE {WORD_INDEX} MATCH ? AND rowid IN ({marks})",
        (_OPEN, _CLOSE, expression, *message_ids),
    )
    return {rowid: _sentinel_spans(text or "") for rowid, text in rows}


def _sentinel_spans(text: str) -> list[tuple[int, int]]:
    """Spans in the unmarked text, from a string marked with the sentinels."""
    spans: list[tuple[int, int]] = []
    plain = 0
    start = None
    for char in text:
        if char == _OPEN:
            start = plain
        elif char == _CLOSE and start is not None:
            spans.append((start, plain))
            start = None
        else:
            plain += 1
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


def render(content: str, spans: Sequence[tuple[int, int]], width: int = SNIPPET_CHARS) -> str:
    """Cut `content` to about `width` characters around the first match, marking matches."""
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
    if end < len(content):
        parts.append("…")
    return "".join(parts)

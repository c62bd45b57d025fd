"""The words of a message as SQLite's word index holds them, for a PostgreSQL tsvector.

SQLite's `messages_fts` tokenizes two columns of a message with FTS5's
`porter unicode61 remove_diacritics 2`: `content`, its text
(`word_index.text_words`: tool output cut, CJK runs as bigrams), and `about`,
its date and speaker as words (`word_index.about_words`). To rank the same,
PostgreSQL must hold exactly those tokens. The text's lexemes keep the
default weight D (`TEXT_WEIGHT`); the `about` lexemes are weighted
`ABOUT_WEIGHT` (A) and placed after the text's with one position left empty,
so that a phrase never spans the two (as FTS5's separate columns) and a
prefix, which SQLite looks for in the text only (`word_index.match_columns`),
can be asked of the text alone (``'期':*D``). Rather than re-implement
unicode61's character tables (frozen at SQLite's own Unicode version) and its
Porter stemmer in Python, the tokens come from that very tokenizer: each
thread keeps a private in-memory FTS5 table, and its `fts5vocab` instance
view lists every token with its position. The same function tokenizes query
terms (`word_tokens`), as FTS5 does a quoted string.

A tsvector has limits SQLite's index has not; past them (only in messages of
megabytes) the two differ: a lexeme is cut at `MAX_LEXEME_BYTES`, positions
past 16383 share that last one, a lexeme keeps its first 256 positions, and
lexemes past `MAX_VECTOR_BYTES` in all are left out.
"""

from __future__ import annotations

import sqlite3
import threading
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice

from memory_core.sessions.snippets import WORD_TOKENIZER
from memory_core.sessions.word_index import about_words, text_words

__all__ = [
    "ABOUT_WEIGHT",
    "MAX_LEXEME_BYTES",
    "TEXT_WEIGHT",
    "IndexRow",
    "index_document",
    "index_documents",
    "tsvector_literal",
    "word_tokens",
]

MAX_LEXEME_BYTES = 2046  # PostgreSQL refuses a lexeme of 2048 bytes or more
MAX_VECTOR_BYTES = 1_000_000  # a tsvector's lexemes may take 1 MB in all
MAX_POSITION = 16383  # PostgreSQL clamps positions to this
MAX_POSITIONS = 256  # and keeps this many per lexeme
_SHORT = MAX_LEXEME_BYTES // 4  # a token of this many characters or fewer is never cut
TEXT_WEIGHT = "D"  # a tsvector's default: the text's lexemes carry no label
ABOUT_WEIGHT = "A"
_PER_THREAD = threading.local()

IndexRow = tuple[str, str, float, str | None]
"""What a message's words are made of: (role, content, timestamp, speaker_name), as stored."""


def index_document(
    role: str, content: str, timestamp: float, speaker_name: str | None
) -> str | None:
    """The tsvector literal of a message's indexed words (None when it has none)."""
    return index_documents([(role, content, timestamp, speaker_name)])[0]


def index_documents(rows: Sequence[IndexRow]) -> list[str | None]:
    """`index_document` for many rows, in one pass of the tokenizer.

    The pass reads each distinct `about` text once (a day's messages of one speaker
    share theirs), then the messages' texts; the tokens come sorted by text and
    position, and each message's are grouped in one loop and written at once (few
    live objects: the garbage collector has little to walk). This runs for every
    message imported (the import's main cost)."""
    abouts = [about_words(content, timestamp, speaker) for _, content, timestamp, speaker in rows]
    distinct = {about: n for n, about in enumerate(dict.fromkeys(abouts))}
    texts = [text_words(role, content) for role, content, _, _ in rows]
    tokens = _tokenize([*distinct, *texts])
    split = bisect_left(tokens, (len(distinct) + 1,))  # where the messages' tokens begin
    about_tokens: list[dict[str, list[int]]] = [{} for _ in distinct]
    for doc, token, offset in islice(tokens, split):
        about_tokens[doc - 1].setdefault(token, []).append(offset + 1)
    words = [_About.of(grouped) for grouped in about_tokens]
    of_row = [words[distinct[about]] for about in abouts]
    out: list[str | None] = [None] * len(rows)
    current = end = 0  # the message (1-based) and its last position
    positions: dict[str, list[int]] = {}
    for doc, token, offset in islice(tokens, split, None):
        if doc - len(distinct) != current:
            if current:  # the about words after the text, one position left empty
                out[current - 1] = _literal(positions, of_row[current - 1], end + 1)
            positions, current = {}, doc - len(distinct)
        end = offset + 1
        found = positions.get(token)
        if found is None:
            positions[token] = [end]
        else:
            found.append(end)
    if current:
        out[current - 1] = _literal(positions, of_row[current - 1], end + 1)
    for n, about in enumerate(of_row):
        if out[n] is None and about.tokens:  # a message whose text has no words
            out[n] = _literal({}, about, 1)
    return out


@dataclass(frozen=True)
class _About:
    """A message's `about` words as tokens: each with its 1-based positions among them,
    and what decides whether `_literal` may write them directly."""

    tokens: tuple[tuple[str, tuple[int, ...]], ...]
    last: int  # the last position
    most: int  # the most positions of one token
    odd: bool  # a token too long for the direct way, or one to quote

    @classmethod
    def of(cls, grouped: dict[str, list[int]]) -> _About:
        return cls(
            tuple((token, tuple(at)) for token, at in grouped.items()),
            max((at[-1] for at in grouped.values()), default=0),
            max(map(len, grouped.values()), default=0),
            any(len(t) > _SHORT or "'" in t or "\\" in t for t in grouped),
        )


def word_tokens(text: str) -> list[str]:
    """The tokens of `text` in order, as the word index makes them (stemmed, folded)."""
    return [token for _, token, _ in _tokenize([text])]


def tsvector_literal(
    tokens: Iterable[tuple[str, int]], about: Iterable[tuple[str, int]] = ()
) -> str | None:
    """A `::tsvector` literal of (token, 0-based position) pairs, those of `about`
    weighted `ABOUT_WEIGHT` (None when there are none)."""
    positions: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for pairs, weight in ((tokens, ""), (about, ABOUT_WEIGHT)):
        for token, offset in pairs:
            lexeme = _cut(token)
            found = positions[lexeme]
            position = min(offset + 1, MAX_POSITION)
            if len(found) < MAX_POSITIONS and (not found or found[-1][0] != position):
                found.append((position, weight))
    parts: list[str] = []
    size = 0
    for lexeme, at in positions.items():
        size += len(lexeme.encode())
        if size > MAX_VECTOR_BYTES:
            break
        parts.append(f"{quote_lexeme(lexeme)}:{','.join(f'{p}{w}' for p, w in at)}")
    return " ".join(parts) or None


def quote_lexeme(lexeme: str) -> str:
    """A lexeme quoted for a tsvector or tsquery literal (quotes and backslashes doubled)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _literal(positions: dict[str, list[int]], about: _About, start: int) -> str | None:
    """`tsvector_literal` of one message's {token: 1-based positions} in its text and
    its `about` words placed after `start`, made directly when no limit applies and
    nothing needs quoting (nearly always), else by it."""
    if about.odd or start + about.last > MAX_POSITION:
        return _exact(positions, about, start)
    parts: list[str] = []
    shared: dict[str, str] = {}  # about words the text has too: their weighted positions
    chars = 0
    for token, offsets in about.tokens:
        at = ",".join([f"{start + p}{ABOUT_WEIGHT}" for p in offsets])
        if token in positions:
            shared[token] = at
        else:
            chars += len(token)
            parts.append(f"'{token}':{at}")
    room = MAX_POSITIONS - about.most
    for token, found in positions.items():
        chars += len(token)
        if (
            len(token) > _SHORT
            or len(found) > room
            or found[-1] > MAX_POSITION
            or "'" in token
            or "\\" in token
        ):
            return _exact(positions, about, start)
        part = (
            f"'{token}':{found[0]}" if len(found) == 1 else f"'{token}':{','.join(map(str, found))}"
        )
        parts.append(part + "," + shared[token] if shared and token in shared else part)
    if chars * 4 > MAX_VECTOR_BYTES:  # a character is 4 bytes at most
        return _exact(positions, about, start)
    return " ".join(parts) or None


def _exact(positions: dict[str, list[int]], about: _About, start: int) -> str | None:
    text = sorted(((token, p - 1) for token, at in positions.items() for p in at), key=_second)
    more = [(token, start + p - 1) for token, at in about.tokens for p in at]
    return tsvector_literal(text, sorted(more, key=_second))


def _second(pair: tuple[str, int]) -> int:
    return pair[1]


def _cut(token: str) -> str:
    data = token.encode()
    if len(data) <= MAX_LEXEME_BYTES:
        return token
    return data[:MAX_LEXEME_BYTES].decode("utf-8", errors="ignore")


def _tokenize(texts: Sequence[str]) -> list[tuple[int, str, int]]:
    """(1-based text number, token, 0-based position) of every token of `texts`, by text
    and position, from FTS5's own tokenizer."""
    conn = _scratch()
    conn.execute("BEGIN")
    try:
        conn.executemany(
            "INSERT INTO t(rowid, content) VALUES (?, ?)",
            ((n, text) for n, text in enumerate(texts, 1) if text),
        )
        found: list[tuple[int, str, int]] = conn.execute(
            "SELECT doc, term, offset FROM v ORDER BY doc, offset"
        ).fetchall()
    finally:
        conn.execute("INSERT INTO t(t) VALUES ('delete-all')")
        conn.execute("COMMIT")
    return found


def _scratch() -> sqlite3.Connection:
    """This thread's in-memory FTS5 table (contentless: only the tokens are kept)."""
    conn: sqlite3.Connection | None = getattr(_PER_THREAD, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute(
            "CREATE VIRTUAL TABLE t USING fts5(content, content='', columnsize=0, "
            f"tokenize='{WORD_TOKENIZER}')"
        )
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        _PER_THREAD.conn = conn
    return conn

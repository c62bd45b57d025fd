"""The words of a message as SQLite's word index holds them, for a PostgreSQL tsvector.

SQLite's `messages_fts` tokenizes `cjk_words(content)` (tool output cut at
`TOOL_INDEX_CHARS`) with FTS5's `porter unicode61 remove_diacritics 2`. To
rank the same, PostgreSQL must hold exactly those tokens. Rather than
re-implement unicode61's character tables (frozen at SQLite's own Unicode
version) and its Porter stemmer in Python, the tokens come from that very
tokenizer: each thread keeps a private in-memory FTS5 table, and its
`fts5vocab` instance view lists every token with its position. The same
function tokenizes query terms (`word_tokens`), as FTS5 does a quoted string.

A tsvector has limits SQLite's index has not; past them (only in messages of
megabytes) the two differ: a lexeme is cut at `MAX_LEXEME_BYTES`, positions
past 16383 share that last one, a lexeme keeps its first 256 positions, and
lexemes past `MAX_VECTOR_BYTES` in all are left out.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence

from memory_core.sessions.query import cjk_words
from memory_core.sessions.schema import TOOL_INDEX_CHARS
from memory_core.sessions.snippets import WORD_TOKENIZER

__all__ = [
    "MAX_LEXEME_BYTES",
    "index_document",
    "index_documents",
    "index_value",
    "tsvector_literal",
    "word_tokens",
]

MAX_LEXEME_BYTES = 2046  # PostgreSQL refuses a lexeme of 2048 bytes or more
MAX_VECTOR_BYTES = 1_000_000  # a tsvector's lexemes may take 1 MB in all
MAX_POSITION = 16383  # PostgreSQL clamps positions to this
MAX_POSITIONS = 256  # and keeps this many per lexeme
_SHORT = MAX_LEXEME_BYTES // 4  # a token of this many characters or fewer is never cut
_PER_THREAD = threading.local()


def index_value(role: str, content: str) -> str:
    """The text SQLite's word index tokenizes for a message (`schema._WORD_VALUE`)."""
    return cjk_words(content[:TOOL_INDEX_CHARS] if role == "tool" else content)


def index_document(role: str, content: str) -> str | None:
    """The tsvector literal of a message's indexed words (None when it has none)."""
    return index_documents([(role, content)])[0]


def index_documents(rows: Sequence[tuple[str, str]]) -> list[str | None]:
    """`index_document` for many (role, content) rows, in one pass of the tokenizer.

    The tokens come sorted by message and position, and each message's are grouped
    in one loop: this runs for every message imported (the import's main cost)."""
    out: list[str | None] = [None] * len(rows)
    current = 0
    positions: dict[str, list[int]] = {}
    for doc, token, offset in _tokenize([index_value(role, content) for role, content in rows]):
        if doc != current:
            if positions:
                out[current - 1] = _literal(positions)
            positions, current = {}, doc
        found = positions.get(token)
        if found is None:
            positions[token] = [offset + 1]
        else:
            found.append(offset + 1)
    if positions:
        out[current - 1] = _literal(positions)
    return out


def word_tokens(text: str) -> list[str]:
    """The tokens of `text` in order, as the word index makes them (stemmed, folded)."""
    return [token for _, token, _ in _tokenize([text])]


def tsvector_literal(tokens: Iterable[tuple[str, int]]) -> str | None:
    """A `::tsvector` literal of (token, 0-based position) pairs (None when there are none)."""
    positions: dict[str, list[int]] = defaultdict(list)
    for token, offset in tokens:
        lexeme = _cut(token)
        found = positions[lexeme]
        position = min(offset + 1, MAX_POSITION)
        if len(found) < MAX_POSITIONS and (not found or found[-1] != position):
            found.append(position)
    parts: list[str] = []
    size = 0
    for lexeme, at in positions.items():
        size += len(lexeme.encode())
        if size > MAX_VECTOR_BYTES:
            break
        parts.append(f"{quote_lexeme(lexeme)}:{','.join(map(str, at))}")
    return " ".join(parts) or None


def quote_lexeme(lexeme: str) -> str:
    """A lexeme quoted for a tsvector or tsquery literal (quotes and backslashes doubled)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _literal(positions: dict[str, list[int]]) -> str | None:
    """`tsvector_literal` of one message's {token: 1-based positions}, made directly when
    no limit applies and nothing needs quoting (nearly always), else by it."""
    parts: list[str] = []
    chars = 0
    for token, at in positions.items():
        chars += len(token)
        if (
            len(token) > _SHORT
            or len(at) > MAX_POSITIONS
            or at[-1] > MAX_POSITION
            or "'" in token
            or "\\" in token
        ):
            return _exact(positions)
        parts.append(
            f"'{token}':{at[0]}" if len(at) == 1 else f"'{token}':{','.join(map(str, at))}"
        )
    if chars * 4 > MAX_VECTOR_BYTES:  # a character is 4 bytes at most
        return _exact(positions)
    return " ".join(parts) or None


def _exact(positions: dict[str, list[int]]) -> str | None:
    pairs = sorted(((token, p - 1) for token, at in positions.items() for p in at), key=_second)
    return tsvector_literal(pairs)


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

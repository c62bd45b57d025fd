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
_PER_THREAD = threading.local()


def index_value(role: str, content: str) -> str:
    """The text SQLite's word index tokenizes for a message (`schema._WORD_VALUE`)."""
    return cjk_words(content[:TOOL_INDEX_CHARS] if role == "tool" else content)


def index_document(role: str, content: str) -> str | None:
    """The tsvector literal of a message's indexed words (None when it has none)."""
    return index_documents([(role, content)])[0]


def index_documents(rows: Sequence[tuple[str, str]]) -> list[str | None]:
    """`index_document` for many (role, content) rows, in one pass of the tokenizer."""
    tokens = _tokenize([index_value(role, content) for role, content in rows])
    return [tsvector_literal(found) for found in tokens]


def word_tokens(text: str) -> list[str]:
    """The tokens of `text` in order, as the word index makes them (stemmed, folded)."""
    return [token for token, _ in _tokenize([text])[0]]


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


def _cut(token: str) -> str:
    data = token.encode()
    if len(data) <= MAX_LEXEME_BYTES:
        return token
    return data[:MAX_LEXEME_BYTES].decode("utf-8", errors="ignore")


def _tokenize(texts: Sequence[str]) -> list[list[tuple[str, int]]]:
    """Each text's (token, position) pairs in order, from FTS5's own tokenizer."""
    conn = _scratch()
    out: list[list[tuple[str, int]]] = [[] for _ in texts]
    conn.execute("BEGIN")
    try:
        conn.executemany(
            "INSERT INTO t(rowid, content) VALUES (?, ?)",
            ((n, text) for n, text in enumerate(texts, 1) if text),
        )
        for doc, term, offset in conn.execute("SELECT doc, term, offset FROM v"):
            out[doc - 1].append((term, offset))
    finally:
        conn.execute("INSERT INTO t(t) VALUES ('delete-all')")
        conn.execute("COMMIT")
    for found in out:
        found.sort(key=lambda pair: pair[1])
    return out


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

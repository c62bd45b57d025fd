"""The words of a message as SQLite's word index holds them, for a PostgreSQL tsvector.

SQLite's `messages_fts` tokenizes two columns of a message with FTS5's
`porter unicode61 remove_diacritics 2`: `content`, its text (`word_index.
text_words`: tool output cut at `TOOL_INDEX_CHARS`, CJK runs as bigrams), and
`about`, its date and speaker as words (`word_index.about_words`). To rank
the same, PostgreSQL must hold exactly those tokens. The text's lexemes keep
the default weight D, the `about` lexemes are weighted `ABOUT_WEIGHT` (A) and
placed after the text's with one position left empty, so that a phrase never
spans the two (as in FTS5's separate columns) and a prefix, which SQLite
looks for in the text only (`word_index.match_columns`), is asked with
`TEXT_WEIGHT` (``'期':*D``). Rather than
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

from memory_core.sessions.snippets import WORD_TOKENIZER
from memory_core.sessions.word_index import about_words, text_words

__all__ = [
    "ABOUT_WEIGHT",
    "MAX_LEXEME_BYTES",
    "TEXT_WEIGHT",
    "IndexRow",
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
TEXT_WEIGHT = "D"  # a tsvector's default: the text's lexemes carry no label
ABOUT_WEIGHT = "A"
_PER_THREAD = threading.local()

IndexRow = tuple[str, str, float, "str | None"]
"""What a message's words are made of: (role, content, timestamp, speaker_name), as stored."""


def index_value(role: str, content: str) -> str:
    """The text of a message SQLite's word index tokenizes in its `content` column."""
    return text_words(role, content)


def index_document(
    role: str, content: str, timestamp: float, speaker_name: str | None
) -> str | None:
    """The tsvector literal of a message's indexed words (None when it has none)."""
    return index_documents([(role, content, timestamp, speaker_name)])[0]


def index_documents(rows: Sequence[IndexRow]) -> list[str | None]:
    """`index_document` for many rows, in one pass of the tokenizer.

    The tokens come sorted by message, column (text first) and position, and each
    message's are grouped in one loop: this runs for every message imported (the
    import's main cost)."""
    out: list[str | None] = [None] * len(rows)
    texts = [
        (text_words(role, content), about_words(content, timestamp, speaker))
        for role, content, timestamp, speaker in rows
    ]
    current = 0
    positions: dict[str, list[int]] = {}
    about: dict[str, list[int]] = {}
    last = 0  # the position of the message's last text token
    for doc, in_about, token, offset in _tokenize(texts):
        if doc != current:
            if positions or about:
                out[current - 1] = _literal(positions, about)
            positions, about, current, last = {}, {}, doc, 0
        if in_about:  # after the text, one position left empty
            found = about.get(token)
            if found is None:
                about[token] = [last + 2 + offset]
            else:
                found.append(last + 2 + offset)
            continue
        last = offset + 1
        found = positions.get(token)
        if found is None:
            positions[token] = [last]
        else:
            found.append(last)
    if positions or about:
        out[current - 1] = _literal(positions, about)
    return out


def word_tokens(text: str) -> list[str]:
    """The tokens of `text` in order, as the word index makes them (stemmed, folded)."""
    return [token for _, _, token, _ in _tokenize([(text, "")])]


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


def _literal(positions: dict[str, list[int]], about: dict[str, list[int]]) -> str | None:
    """`tsvector_literal` of one message's {token: 1-based positions} in its text and in
    its `about` words, made directly when no limit applies and nothing needs quoting
    (nearly always), else by it."""
    parts: list[str] = []
    chars = 0
    for token, at in positions.items():
        chars += len(token)
        more = about.get(token)
        if _odd(token, at if more is None else at + more):
            return _exact(positions, about)
        part = f"'{token}':{at[0]}" if len(at) == 1 else f"'{token}':{','.join(map(str, at))}"
        parts.append(part if more is None else part + "," + _weighted(more))
    for token, at in about.items():
        if token not in positions:
            chars += len(token)
            if _odd(token, at):
                return _exact(positions, about)
            parts.append(f"'{token}':{_weighted(at)}")
    if chars * 4 > MAX_VECTOR_BYTES:  # a character is 4 bytes at most
        return _exact(positions, about)
    return " ".join(parts) or None


def _odd(token: str, at: list[int]) -> bool:
    """Whether a lexeme needs `tsvector_literal`: too long, too many or too far
    positions, or a character to quote."""
    return (
        len(token) > _SHORT
        or len(at) > MAX_POSITIONS
        or at[-1] > MAX_POSITION
        or "'" in token
        or "\\" in token
    )


def _weighted(at: list[int]) -> str:
    return ",".join(f"{p}{ABOUT_WEIGHT}" for p in at)


def _exact(positions: dict[str, list[int]], about: dict[str, list[int]]) -> str | None:
    text = sorted(((token, p - 1) for token, at in positions.items() for p in at), key=_second)
    more = sorted(((token, p - 1) for token, at in about.items() for p in at), key=_second)
    return tsvector_literal(text, more)


def _second(pair: tuple[str, int]) -> int:
    return pair[1]


def _cut(token: str) -> str:
    data = token.encode()
    if len(data) <= MAX_LEXEME_BYTES:
        return token
    return data[:MAX_LEXEME_BYTES].decode("utf-8", errors="ignore")


def _tokenize(texts: Sequence[tuple[str, str]]) -> list[tuple[int, bool, str, int]]:
    """(1-based number, whether in `about`, token, 0-based position) of every token of
    each (text, about) pair, by number, column (text first) and position, from FTS5's
    own tokenizer."""
    conn = _scratch()
    conn.execute("BEGIN")
    try:
        conn.executemany(
            "INSERT INTO t(rowid, content, about) VALUES (?, ?, ?)",
            ((n, text, about) for n, (text, about) in enumerate(texts, 1) if text or about),
        )
        found: list[tuple[int, bool, str, int]] = conn.execute(
            "SELECT doc, col = 'about', term, offset FROM v ORDER BY doc, 2, offset"
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
            "CREATE VIRTUAL TABLE t USING fts5(content, about, content='', columnsize=0, "
            f"tokenize='{WORD_TOKENIZER}')"
        )
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        _PER_THREAD.conn = conn
    return conn

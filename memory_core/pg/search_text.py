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

Asking that table for every message's tokens costs ~30 µs a message (reading
them back through fts5vocab, mostly), so the tokens are usually found
without it, from what it answered before (`_Words`). unicode61 decides, for
each character on its own, whether it is a separator or a token character,
and a token (a run of token characters starting with a letter or digit) is
folded and stemmed alone: so a text is cut into runs in Python (ASCII by a
regular expression; any other character classified once by asking a probe
table how it splits ``q?q`` and ``?q``), and each distinct run's token is
asked of the table once and kept (`RUN_CACHE` of them). A text with a
character whose class is not plain (a diacritic that only continues a token,
a lone surrogate, a token character folded to nothing) or a run that does not
give exactly one token goes to the table whole, as before: the tokens are
always the table's.

A tsvector has limits SQLite's index has not; past them (only in messages of
megabytes) the two differ: a lexeme is cut at `MAX_LEXEME_BYTES`, positions
past 16383 share that last one, a lexeme keeps its first 256 positions, and
lexemes past `MAX_VECTOR_BYTES` in all are left out.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, cast

from memory_core.sessions.snippets import WORD_TOKENIZER
from memory_core.sessions.sql.search import INSERT_SCRATCH_TEXT
from memory_core.sessions.word_index import about_words, fts_delete_all, text_words

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
    share theirs), then the messages' texts (`_token_lists`: the table is asked only
    what it was not asked before); each message's tokens are grouped in one loop and
    written at once. This runs for every message imported and every turn stored."""
    abouts, words, texts = _tokenized(rows)
    out: list[str | None] = []
    for tokens, about_text in zip(texts, abouts, strict=True):
        about = words[about_text]
        if not tokens:
            out.append(_literal({}, about, 1) if about.tokens else None)
            continue
        positions: dict[str, list[int]] = {}
        for n, token in enumerate(tokens, 1):
            at = positions.get(token)
            if at is None:
                positions[token] = [n]
            else:
                at.append(n)
        # the about words after the text, one position left empty
        out.append(_literal(positions, about, len(tokens) + 1))
    return out


def _tokenized(
    rows: Sequence[IndexRow],
) -> tuple[list[str], dict[str, _About], list[list[str]]]:
    """Each row's `about` text, those texts' grouped tokens (each distinct one read once,
    then kept), and each row's text tokens: one `_token_lists` call for them all."""
    abouts = [about_words(content, timestamp, speaker) for _, content, timestamp, speaker in rows]
    kept = _Words.abouts
    words = {about: kept.get(about) for about in abouts}
    distinct = [about for about, known in words.items() if known is None]
    texts = [text_words(role, content) for role, content, _, _ in rows]
    found = _token_lists([*distinct, *texts])
    if len(kept) + len(distinct) > ABOUT_CACHE:
        kept.clear()
    for text, tokens in zip(distinct, found, strict=False):
        grouped: dict[str, list[int]] = {}
        for n, token in enumerate(tokens, 1):
            grouped.setdefault(token, []).append(n)
        words[text] = kept[text] = _About.of(grouped)
    made = cast(dict[str, _About], words)  # every one is made just above
    return abouts, made, found[len(distinct) :]


@dataclass(frozen=True)
class _About:
    """A message's `about` words as tokens: each with its 1-based positions among them,
    and what decides whether `_literal` may write them directly."""

    tokens: tuple[tuple[str, tuple[int, ...]], ...]
    last: int  # the last position
    most: int  # the most positions of one token
    odd: bool  # a token too long for the direct way, or one to quote
    chars: int  # the characters of the tokens

    @classmethod
    def of(cls, grouped: dict[str, list[int]]) -> _About:
        return cls(
            tuple((token, tuple(at)) for token, at in grouped.items()),
            max((at[-1] for at in grouped.values()), default=0),
            max(map(len, grouped.values()), default=0),
            any(len(t) > _SHORT or "'" in t or "\\" in t for t in grouped),
            sum(map(len, grouped)),
        )


def word_tokens(text: str) -> list[str]:
    """The tokens of `text` in order, as the word index makes them (stemmed, folded)."""
    return _token_lists([text])[0]


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
    nothing needs quoting (nearly always), else by it. The limits are checked for
    the message as a whole (its tokens joined), not token by token."""
    if about.odd or start + about.last > MAX_POSITION:
        return _exact(positions, about, start)
    keys = "".join(positions)
    if (
        "'" in keys
        or "\\" in keys
        or (len(keys) + about.chars) * 4 > MAX_VECTOR_BYTES  # a character is 4 bytes at most
        or (len(keys) > _SHORT and max(map(len, positions)) > _SHORT)
        or (
            start > MAX_POSITIONS - about.most
            and max(map(len, positions.values())) > MAX_POSITIONS - about.most
        )
    ):
        return _exact(positions, about, start)
    parts: list[str] = []
    shared: dict[str, str] = {}  # about words the text has too: their weighted positions
    for token, offsets in about.tokens:
        at = ",".join([f"{start + p}{ABOUT_WEIGHT}" for p in offsets])
        if token in positions:
            shared[token] = at
        else:
            parts.append(f"'{token}':{at}")
    for token, found in positions.items():
        part = (
            f"'{token}':{found[0]}" if len(found) == 1 else f"'{token}':{','.join(map(str, found))}"
        )
        parts.append(part + "," + shared[token] if shared and token in shared else part)
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


def _tokenize(texts: Sequence[str], *, probe: bool = False) -> list[tuple[int, str, int]]:
    """(1-based text number, token, 0-based position) of every token of `texts`, by text
    and position, from FTS5's own tokenizer (unicode61 alone with `probe`)."""
    conn = _scratch(probe)
    conn.execute("BEGIN")
    try:
        conn.executemany(
            INSERT_SCRATCH_TEXT.sqlite, ((n, text) for n, text in enumerate(texts, 1) if text)
        )
        found: list[tuple[int, str, int]] = conn.execute(
            "SELECT doc, term, offset FROM v ORDER BY doc, offset"
        ).fetchall()
    finally:
        conn.execute(fts_delete_all("t"))
        conn.execute("COMMIT")
    return found


def _scratch(probe: bool = False) -> sqlite3.Connection:
    """This thread's in-memory FTS5 table (contentless: only the tokens are kept), with
    the word index's tokenizer or, for `probe`, its unicode61 without the stemmer."""
    name = "probe" if probe else "conn"
    conn: sqlite3.Connection | None = getattr(_PER_THREAD, name, None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        # FTS5's stemmer cuts bytes: "Deploy\u0924ing" loses "ing", then half of a doubled
        # UTF-8 byte, leaving a token that is not UTF-8; it is read with U+FFFD in its
        # place (the query is tokenized the same way), never an error that loses the message
        conn.text_factory = _lenient
        tokenizer = _PROBE_TOKENIZER if probe else WORD_TOKENIZER
        conn.execute(
            "CREATE VIRTUAL TABLE t USING fts5(content, content='', columnsize=0, "
            f"tokenize='{tokenizer}')"
        )
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        setattr(_PER_THREAD, name, conn)
    return conn


def _lenient(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


RUN_CACHE = 100_000  # the runs whose token is kept (then they are forgotten, all at once)
ABOUT_CACHE = 10_000  # the `about` texts (a day and a speaker) whose tokens are kept
_ASCII_RUN = re.compile("[0-9A-Za-z]+")
_PROBE_TOKENIZER = WORD_TOKENIZER.removeprefix("porter ")  # unicode61, as configured
_SEPARATOR, _TOKEN, _OTHER = 0, 1, 2  # a character's class (_OTHER: ask the table)


class _Words:
    """What the table answered before, shared by every thread (each asks its own
    table; the values do not depend on who asked): a class for each non-ASCII
    character seen, and the token of each run seen (None: not exactly one)."""

    classes: ClassVar[dict[str, int]] = {}
    others: ClassVar[set[str]] = set()  # the characters of class _OTHER
    abouts: ClassVar[dict[str, _About]] = {}  # the `about` texts' tokens, as `_About`
    runs: ClassVar[dict[str, str | None]] = {}
    # ASCII punctuation and every separator seen, to a space (for str.translate)
    spaces: ClassVar[dict[int, str]] = {c: " " for c in range(128) if not chr(c).isalnum()}


def _token_lists(texts: Sequence[str]) -> list[list[str]]:
    """The tokens of each of `texts` in order, as `_tokenize` gives them."""
    known = _Words.runs.get
    out: list[list[str]] = []
    todo: list[tuple[int, list[str] | None]] = []  # texts with a run not known, or none
    for n, text in enumerate(texts):
        runs = _runs(text)
        found = list(map(known, runs)) if runs is not None else [None]
        if None in found:
            todo.append((n, runs))
            out.append([])
        else:
            out.append(cast(list[str], found))
    if not todo:
        return out
    unknown = {run: None for _, runs in todo if runs for run in runs if known(run) is None}
    learned = _learn_runs(list(unknown)) if unknown else {}
    exact: list[int] = []  # the texts the table reads whole
    for n, runs in todo:
        again = [known(run) or learned.get(run) for run in runs] if runs is not None else [None]
        if None in again:
            exact.append(n)
        else:
            out[n] = cast(list[str], again)
    if exact:
        for doc, token, _ in _tokenize([texts[n] for n in exact]):
            out[exact[doc - 1]].append(token)
    return out


def _runs(text: str) -> list[str] | None:
    """`text`'s runs of token characters, or None when the table must read it whole."""
    if text.isascii():
        return _ASCII_RUN.findall(text)
    chars = set(text)
    unknown = [c for c in chars.difference(_Words.classes) if not c.isascii()]
    if unknown:
        _learn_characters(unknown)
    if not chars.isdisjoint(_Words.others):
        return None
    return text.translate(_Words.spaces).split()


def _learn_characters(chars: list[str]) -> None:
    """Class each character by how the probe table splits ``q?q`` and ``?q``: into
    two tokens (a separator), or into one and one that is not ``q`` (a token
    character); anything else, and surrogates, are left to the table."""
    asked = [c for c in chars if not 0xD800 <= ord(c) <= 0xDFFF]
    found: dict[int, list[tuple[str, int]]] = defaultdict(list)
    if asked:
        for doc, token, offset in _tokenize(
            [text for c in asked for text in (f"q{c}q", f"{c}q")], probe=True
        ):
            found[doc].append((token, offset))
    for c in chars:
        _Words.classes[c] = _OTHER
        _Words.others.add(c)
    for n, c in enumerate(asked):
        between, before = found[2 * n + 1], found[2 * n + 2]
        if between == [("q", 0), ("q", 1)]:
            _Words.classes[c] = _SEPARATOR
            _Words.spaces[ord(c)] = " "
        elif len(between) == 1 and len(before) == 1 and before[0][0] != "q":
            _Words.classes[c] = _TOKEN
        else:
            continue
        _Words.others.discard(c)


def _learn_runs(runs: list[str]) -> dict[str, str | None]:
    """The token of each run (None unless exactly one at the first position), kept."""
    learned: dict[str, str | None] = dict.fromkeys(runs)
    seen: dict[int, int] = defaultdict(int)
    for doc, token, offset in _tokenize(runs):
        seen[doc] += 1
        learned[runs[doc - 1]] = token if offset == 0 else None
    for n, run in enumerate(runs, 1):
        if seen[n] != 1:
            learned[run] = None
    if len(_Words.runs) + len(learned) > RUN_CACHE:
        _Words.runs.clear()
    if len(learned) <= RUN_CACHE:
        _Words.runs.update(learned)
    return learned

"""Turn free text into search terms that FTS5 syntax cannot break or widen.

The user's text is never handed to `MATCH` as it is. It is normalised (NFKC,
control characters and NUL removed, capped at `MAX_QUERY_CHARS`), then cut into
terms, and each term is later quoted as one FTS5 string, so operators (`AND`,
`OR`, `NOT`, `NEAR(`), column filters, `*`, `^` and parentheses are only
ever searched for as words or dropped as punctuation.

Term kinds:
- `WORD`: one word for the `unicode61` index (lower-cased), or one
  overlapping pair of Chinese/Japanese/Korean characters (see below).
- `PHRASE`: words that must be adjacent, from a balanced ``"quoted phrase"``
  or a dotted/hyphenated token such as ``node.js`` or ``e-mail``.
- `PREFIX`: a word matched as the start of longer words: a query of one CJK
  character, or search's fallback for a word with no hit (``kube`` finds
  ``kubernetes``); never produced from user syntax (a typed `*` is dropped).
- `LITERAL`: emoji and symbols, matched as a substring (trigram index from
  three characters, the base table below that).

Chinese, Japanese and Korean text is searched by words, not as one run. The
word index holds every CJK run as its overlapping bigrams plus its last
character alone (`cjk_words`: 部署迁移失败 → 部署 署迁 迁移 移失 失败 败), and a
CJK run in a query becomes its bigrams, each an ordinary `WORD` with the same
OR semantics and coverage ranking as English words: 部署失败 finds a message
saying 部署…迁移失败. A one-character run is a `PREFIX` (every character of
a run starts one of its tokens); a quoted run must match contiguously (a
`PHRASE` of its bigrams).

Common English words are dropped unless nothing else is left, so that they
cannot swamp the rare words that carry the meaning.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

MAX_QUERY_CHARS = 2048
MAX_TERMS = 24
MAX_TERM_CHARS = 64
MAX_BIGRAMS_PER_RUN = 24

CJK_RANGES = (
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3100, 0x312F),  # bopomofo
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
)
"""The characters searched as CJK (schema.py builds its SQL from them)."""
CJK_CLASS = "".join(f"{chr(low)}-{chr(high)}" for low, high in CJK_RANGES)
"""`CJK_RANGES` as a regex character class (without the brackets)."""
_CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
SYMBOL_CLASS = "\U0001f000-\U0001faff\u2600-\u27bf"
"""Emoji and symbols: searched as literals (a regex class; schema.py's GLOB uses it too)."""
_WORD = rf"(?:(?![{CJK_CLASS}])[^\W_])+"
_TOKEN = re.compile(
    rf'(?P<quoted>"[^"]*")'
    rf"|(?P<cjk>[{CJK_CLASS}]+)"
    rf"|(?P<word>{_WORD}(?:[.\-_]{_WORD})*)"
    rf"|(?P<symbol>[{SYMBOL_CLASS}]+)"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_INVISIBLE = re.compile(r"[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been
    before being below between both but by can cannot could couldn d did didn do does
    doesn doing don down during each else ever few for from further get got had hadn has
    hasn have haven having he her here hers herself him himself his how i if in into is
    isn it its itself just ll m ma me might more most must mustn my myself no nor not now
    o of off on once only or other our ours ourselves out over own re s same shall shan
    she should shouldn so some such t than that the their theirs them themselves then
    there these they this those through to too under until up upon us ve very was wasn
    we were weren what when where which while who whom whose why will with won would
    wouldn y you your yours yourself yourselves also let like likely tell told say said
    something anything thing things way ways kind sort many much one ones even still yet
    per via etc ok okay yes yeah oh hey hi
    """.split()  # noqa: SIM905 - a word list reads better as text
)


class TermKind(Enum):
    WORD = "word"
    PHRASE = "phrase"
    PREFIX = "prefix"
    LITERAL = "literal"


@dataclass(frozen=True)
class QueryTerm:
    """One search term, already normalised."""

    text: str
    kind: TermKind

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(self.text.split(" ")) if self.kind is TermKind.PHRASE else (self.text,)

    def match_expression(self) -> str:
        """The term as one quoted FTS5 string: nothing inside can act as syntax."""
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + "*" if self.kind is TermKind.PREFIX else quoted

    def as_prefix(self) -> QueryTerm:
        """The same word matched as the start of longer words (the no-hit fallback)."""
        return QueryTerm(self.text, TermKind.PREFIX)


@dataclass(frozen=True)
class ParsedQuery:
    """The terms of a query, in the order they appeared, without duplicates."""

    terms: tuple[QueryTerm, ...]

    def __bool__(self) -> bool:
        return bool(self.terms)

    def or_expression(self) -> str:
        """An OR of the quoted word-index terms ('' when there are none)."""
        return word_index_expression(self.terms)


def word_index_expression(terms: Sequence[QueryTerm]) -> str:
    """The OR of the terms that the word index answers ('' when there are none)."""
    kinds = (TermKind.WORD, TermKind.PHRASE, TermKind.PREFIX)
    return " OR ".join(t.match_expression() for t in terms if t.kind in kinds)


def normalise(text: str) -> str:
    """NFKC, without control or invisible formatting characters, capped in length."""
    text = unicodedata.normalize("NFKC", text[: MAX_QUERY_CHARS * 2])
    text = _INVISIBLE.sub("", _CONTROL.sub(" ", text))  # invisible marks never split a word
    return text[:MAX_QUERY_CHARS]


def parse_query(text: str) -> ParsedQuery:
    """Cut `text` into search terms; see the module docstring for the rules."""
    candidates: list[QueryTerm] = []
    for match in _TOKEN.finditer(normalise(text)):
        kind = match.lastgroup
        value = match.group()
        if kind == "quoted":
            candidates.extend(_quoted_terms(value[1:-1]))
        elif kind == "cjk":
            candidates.extend(_cjk_terms(value))
        elif kind == "symbol":
            candidates.append(QueryTerm(value[:MAX_TERM_CHARS], TermKind.LITERAL))
        else:
            candidates.append(_word_term(value))
    return ParsedQuery(_select(candidates))


def _word_term(token: str) -> QueryTerm:
    words = [w for w in re.split(r"[.\-_]", token.casefold()) if w]
    words = [w[:MAX_TERM_CHARS] for w in words]
    if len(words) == 1:
        return QueryTerm(words[0], TermKind.WORD)
    return QueryTerm(" ".join(words), TermKind.PHRASE)


def _quoted_terms(inner: str) -> list[QueryTerm]:
    """A quoted phrase of words stays a phrase (CJK included); symbols inside are split."""
    if _CJK_RUN.search(inner):
        return _quoted_cjk_terms(inner)
    words = [w.casefold()[:MAX_TERM_CHARS] for w in re.findall(_WORD, inner)]
    if not words:
        return []
    if len(words) == 1:
        return [QueryTerm(words[0], TermKind.WORD)]
    return [QueryTerm(" ".join(words[:MAX_TERMS]), TermKind.PHRASE)]


def cjk_words(text: str) -> str:
    """`text` as the word index holds it: each CJK run as its bigrams and last character.

    部署迁移失败 → " 部署 署迁 迁移 移失 失败 败 ". Every position of a run starts
    one token, so a one-character query is a prefix query. ASCII text is
    returned at once. Like SQL's text functions (schema.py's twin of this
    one), it reads text holding CJK only up to a NUL.
    """
    if text.isascii():
        return text
    head = text.split("\x00", 1)[0]
    return _CJK_RUN.sub(_run_words, head) if _CJK_RUN.search(head) else text


def has_cjk(text: str) -> bool:
    """Whether `text` holds a Chinese/Japanese/Korean character."""
    return _CJK_RUN.search(text) is not None


def _run_words(match: re.Match[str]) -> str:
    run = match.group()
    return " " + " ".join([*_bigrams(run), run[-1]]) + " "


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _cjk_terms(run: str) -> list[QueryTerm]:
    """A CJK run of a query: its bigrams as words; one character as a prefix."""
    if len(run) == 1:
        return [QueryTerm(run, TermKind.PREFIX)]
    return [QueryTerm(g, TermKind.WORD) for g in _bigrams(run)[:MAX_BIGRAMS_PER_RUN]]


def _quoted_cjk_terms(inner: str) -> list[QueryTerm]:
    """A quoted phrase holding CJK: one phrase of the tokens the index holds, in order.

    A run inside the phrase contributes its bigrams, and its last character
    too when a word follows it (the index has that token in between); a
    one-character run at the end makes the phrase a prefix.
    """
    pieces: list[str] = []
    tokens = re.findall(rf"[{CJK_CLASS}]+|{_WORD}", inner)
    for position, token in enumerate(tokens):
        if not _CJK_RUN.fullmatch(token):
            pieces.append(token.casefold()[:MAX_TERM_CHARS])
        elif len(token) == 1 or position < len(tokens) - 1:
            pieces.extend([*_bigrams(token), token[-1]])
        else:
            pieces.extend(_bigrams(token))
    last_alone = len(tokens[-1]) == 1 and _CJK_RUN.fullmatch(tokens[-1]) is not None
    if len(pieces) > MAX_TERMS:
        pieces, last_alone = pieces[:MAX_TERMS], False
    if len(pieces) == 1:
        return [QueryTerm(pieces[0], TermKind.PREFIX if last_alone else TermKind.WORD)]
    return [QueryTerm(" ".join(pieces), TermKind.PREFIX if last_alone else TermKind.PHRASE)]


def is_stopword(term: QueryTerm) -> bool:
    return term.kind is TermKind.WORD and term.text in STOPWORDS


def _select(candidates: list[QueryTerm]) -> tuple[QueryTerm, ...]:
    """Drop duplicates and stopwords (unless only stopwords remain); cap the count."""
    unique = list(dict.fromkeys(candidates))
    meaningful = [t for t in unique if not is_stopword(t)]
    return tuple((meaningful or unique)[:MAX_TERMS])

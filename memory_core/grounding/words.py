"""Words: the tokens of a text, the distinctive ones an entry is checked by, and when two
words are one word inflected.

Distinctive words: words of three or more letters that are not stopwords of the
languages served (English, French, German, Spanish, Italian, Portuguese, Russian, and a
few common Hindi and Arabic ones), nor words an entry uses to name the person ("user";
not the verb of what they feel: "likes", "prefers" must be theirs, or "User likes cats"
would pass from "I hate cats"), nor negations (a negation is the entry's polarity, not one of its
words); every number; in Chinese, Japanese and Korean, the character bigrams of each
run (a run of one character counts as itself). A Japanese run is cut at its hiragana
(particles and endings, mostly): 寿司が好き is checked by 寿司 and 好, so 大好き
grounds it; a bigram over a negation (不喝) is left out for the same reason as "not".

A word matches the same word or an inflection of it:
- one a prefix of the other with at most three letters more ("live" / "lives",
  "Hund" / "Hunde", "llama" / "llamado");
- a shared start of five letters or more covering 70% of the longer one ("Москва" /
  "Москве", "programming" / "programmer");
- the same stem once one inflectional ending of the languages served is taken off,
  leaving three letters or more ("living" / "lived", "vivo" / "vive", "wohne" /
  "wohnt", "bois" / "boit", "mudé" / "mudó", "живу" / "живёт"); in Arabic script, the
  same word without its article and a verb's person prefix ("أحب" / "يحب").
A number matches only itself, a CJK bigram only itself. A synonym is not recognised
("physician" for "doctor"), nor a translation, nor Korean verb endings (산다 / 살아요):
entries are to be written in the person's words. The rule can join two words that
only look inflected ("cars" / "care"); the check asks for all of an entry's words
together, which keeps such a match from grounding much alone.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections.abc import Iterable

from memory_core.grounding.polarity import NEGATION_WORDS, Word, negation_spans
from memory_core.sessions.query import STOPWORDS

MIN_WORD_CHARS = 3
INFLECTION_CHARS = 3  # "live" -> "lives", "prefer" -> "prefers", "Hund" -> "Hunde"
STEM_CHARS = 5
STEM_SHARE = 0.7
MIN_STEM_CHARS = 3

_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3100-\u312f"  # bopomofo
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af"  # Hangul syllables
)
_LETTER = r"[^\W\d_]|[\u0900-\u097f\u064b-\u065f\u0670]"  # with Devanagari and Arabic marks
_TOKEN = re.compile(
    rf"(?P<cjk>[{_CJK}]+)|(?P<number>\d+(?:[.,:/-]\d+)*)|(?P<word>(?:{_LETTER})(?:{_LETTER}|\d)*)"
)
_CJK_RUN = re.compile(f"[{_CJK}]+")
_HIRAGANA = re.compile("[\u3040-\u309f]+")
_NOT_HIRAGANA = re.compile("[^\u3040-\u309f]+")
_WHOLE = re.compile(".+", re.DOTALL)
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ARABIC = re.compile("[\u0600-\u06ff]+")
_NOT = re.compile(r"(?<=[^\W\d_])n['’]t\b")
CJK_META = re.compile("(?:用户|用戶|使用者)的?|ユーザー|ユーザ|사용자|유저")
"""How an entry names the person in Chinese, Japanese or Korean (left out of its words)."""

_OTHER_STOPWORDS = """
    le la les un une des du de et ou est sont pour dans sur avec pas que qui mais très
    elle il ils elles nous vous mon ma mes son sa ses leur aux ce cette ces être avoir
    der die das ein eine einen einem und oder ist sind für mit nicht auch ich mein meine
    sie wir ihr dem den des von zu bei aus sehr aber wie noch habe hat haben
    el los las una unos unas y o es son para con por que muy pero mi mis su sus yo del
    al lo le les tengo tiene soy estoy está como comme als
    il lo gli uno una e di da in con per che non sono ho ha mio mia suo sua molto ma
    o os as um uma uns umas e do da dos das em no na nos nas com por que não eu meu
    minha seu sua muito mas tenho tem sou estou
    и в во не что он она оно они я мы вы ты на с со как а то все это так его ее её их
    мой моя моё мои у же за по из от до бы был была было были есть очень но или
    है हैं का की के में और से को पर यह वह मैं मेरा मेरी मुझे था थी थे भी नहीं
    في من على إلى عن أن هذا هذه هو هي أنا انا لا ما مع كان كانت
"""
_META = """
    user users user's person person's persons people they them their theirs
    name named called goes usually often always never currently mentioned said says
    utilisateur utilisatrice benutzer benutzerin nutzer usuario usuaria utente
    usuário usuária пользователь пользователя пользовательница
"""
IGNORED = (
    STOPWORDS | frozenset(_OTHER_STOPWORDS.split()) | frozenset(_META.split()) | NEGATION_WORDS
)
"""Words never distinctive: stopwords of the languages served, words about the person,
negations."""

_ENDINGS = tuple(
    sorted(
        set(
            """
            ing ed es s e
            amos emos imos ando iendo ado ada ados adas ido ida idos idas aba aban ía ían
            ar er ir as os an en o a é ó í á ão ões
            ons ez ent ais ait ée ées és t
            ern est et st n
            ами ями ого его ому ему ой ей ий ый ая ое ом ем ам ям ах ях ть ет ёт ит ут ют
            ешь ёшь ишь у ю а я о е ы и ь
            """.split()  # noqa: SIM905 - a word list reads better as text
        ),
        key=len,
        reverse=True,
    )
)
_ARABIC_PREFIXES = "يتنأا"


def normalise(text: str) -> str:
    """`text` as words are read from it: NFKC, casefolded, "n't" as " not"."""
    return _NOT.sub(" not", unicodedata.normalize("NFKC", text).casefold())


def tokens(text: str, *, entry: bool) -> list[Word]:
    """The tokens of `text` (already `normalise`d), in order, each with its offset.

    `entry`: only the distinctive words an entry is checked by. Otherwise every token of
    what the person said (every bigram of a CJK run, and each Han character alone, so an
    entry's one-character run finds it), marked distinctive or not."""
    found: list[Word] = []
    for match in _TOKEN.finditer(text):
        if match.group("cjk"):
            found.extend(_cjk(match.group("cjk"), match.start(), entry=entry))
        elif match.group("number"):
            found.append(Word(match.group("number"), match.start(), False, True))
        else:
            word = match.group("word")
            distinctive = len(word) >= MIN_WORD_CHARS and word not in IGNORED
            if distinctive or not entry:
                found.append(Word(word, match.start(), False, distinctive))
    return found


def said_words(text: str) -> list[str]:
    """Every token of what the person said (`normalise`d), as `tokens` gives them with
    `entry=False`, text only: what `WordIndex` is filled with."""
    found: list[str] = []
    for match in _TOKEN.finditer(text):
        run = match.group("cjk")
        if not run:
            found.append(match.group())
            continue
        found.extend(run[i : i + 2] for i in range(len(run) - 1))
        found.extend(_HAN.findall(run) if len(run) > 1 else [run])
    return found


def distinctive_words(text: str) -> tuple[str, ...]:
    """The words of `text` an entry is checked by, in order, once each."""
    text = normalise(CJK_META.sub(" ", text))
    return tuple(dict.fromkeys(w.text for w in tokens(text, entry=True)))


def same_word(a: str, b: str) -> bool:
    """Whether `a` and `b` (casefolded words) are one word, or one an inflection of the
    other (see the module doc)."""
    if a == b:
        return True
    if _is_number(a) or _is_number(b) or is_cjk(a) or is_cjk(b):
        return False
    if _ARABIC.fullmatch(a) and _ARABIC.fullmatch(b):
        return _arabic_stem(a) == _arabic_stem(b)
    return _inflection(a, b) or stem(a) == stem(b)


def stem(word: str) -> str:
    """`word` without one inflectional ending, keeping at least three letters."""
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= MIN_STEM_CHARS:
            return word[: -len(ending)]
    return word


def is_cjk(word: str) -> bool:
    return _CJK_RUN.fullmatch(word) is not None


class WordIndex:
    """Where each word of a text was said: word -> the places (ints) it occurs, with
    lookups that find a word's inflections too."""

    def __init__(self) -> None:
        self._where: dict[str, set[int]] = {}
        self._stems: dict[str, set[str]] = {}
        self._sorted: list[str] | None = None

    def add(self, word: str, place: int) -> None:
        places = self._where.get(word)
        if places is None:
            self._where[word] = places = set()
            if not _is_number(word) and not is_cjk(word):
                self._stems.setdefault(_stem_key(word), set()).add(word)
            self._sorted = None
        places.add(place)

    def matches(self, word: str) -> frozenset[str]:
        """The indexed words that are `word` or an inflection of it."""
        found = {word} if word in self._where else set()
        if _is_number(word) or is_cjk(word):
            return frozenset(found)
        found.update(self._stems.get(_stem_key(word), ()))
        found.update(w for w in self._near(word) if same_word(word, w))
        return frozenset(found)

    def places(self, words: Iterable[str]) -> set[int]:
        """Every place where one of `words` (as `matches` gives them) occurs."""
        found: set[int] = set()
        for word in words:
            found |= self._where.get(word, set())
        return found

    def _near(self, word: str) -> list[str]:
        # The words sharing `word`'s first three letters; they sort together.
        if self._sorted is None:
            self._sorted = sorted(self._where)
        start = word[:MIN_WORD_CHARS]
        near = []
        for said in self._sorted[bisect_left(self._sorted, start) :]:
            if not said.startswith(start):
                break
            near.append(said)
        return near


def _cjk(run: str, at: int, *, entry: bool) -> list[Word]:
    if not entry:
        grams = [Word(run[i : i + 2], at + i, True, not _HIRAGANA.fullmatch(run[i : i + 2]))
                 for i in range(len(run) - 1)]  # fmt: skip
        singles = [Word(c, at + i, True, False) for i, c in enumerate(run) if _HAN.match(c)]
        if len(run) == 1 and not singles:
            singles = [Word(run, at, True, False)]
        return grams + singles
    negated = negation_spans(run)
    found = []
    pieces = _NOT_HIRAGANA.finditer(run) if _HAN.search(run) else [_WHOLE.match(run)]
    for match in pieces:
        if match is None:
            continue
        piece, offset = match.group(), match.start()
        if len(piece) == 1:  # one kana or Hangul syllable alone is grammar (a particle)
            if _HAN.fullmatch(piece) and not _over(offset, offset + 1, negated):
                found.append(Word(piece, at + offset, True, True))
            continue
        for i in range(len(piece) - 1):
            gram = piece[i : i + 2]
            if not _HIRAGANA.fullmatch(gram) and not _over(offset + i, offset + i + 2, negated):
                found.append(Word(gram, at + offset + i, True, True))
    return found


def _over(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    return any(s < end and start < e for s, e in spans)


def _inflection(a: str, b: str) -> bool:
    shorter, longer = sorted((a, b), key=len)
    shared = _common_prefix(shorter, longer)
    if shared == len(shorter) and len(longer) - shared <= INFLECTION_CHARS:
        return len(shorter) >= MIN_WORD_CHARS
    return shared >= STEM_CHARS and shared >= STEM_SHARE * len(longer)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _stem_key(word: str) -> str:
    return _arabic_stem(word) if _ARABIC.fullmatch(word) else stem(word)


def _arabic_stem(word: str) -> str:
    word = word.removeprefix("ال")
    if len(word) > 2 and word[0] in _ARABIC_PREFIXES:
        word = word[1:]
    return word


def _is_number(word: str) -> bool:
    return word[:1].isdigit()

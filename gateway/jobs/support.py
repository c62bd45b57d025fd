"""Whether an entry about a person is supported by what the person said.

A background job may write about a person only what that person said in the
stretch it learned from. `check` compares an entry's distinctive words with
the person's own words (`OwnWords`: their messages, without the lines they
quoted and without a picture's description, which the auxiliary model wrote;
a voice note's transcript counts, without its marker): an entry is supported
when every number in it, at least one of its distinctive words, and at least
half of them appear there. Half, not all, because an entry is a summary
("Prefers dark mode" from "I like dark mode"); numbers, all of them, because
a number is usually the fact itself (a year, a dose, an amount) and an
invented one is the harm.

Distinctive words: words of three or more letters that are not stopwords of
the languages served (English, French, German, Spanish, Italian, Portuguese,
Russian, and a few common Hindi and Arabic ones) nor words an entry uses to
talk about the person ("user", "prefers"); every number; in Chinese, Japanese
and Korean, the character bigrams of each run (a run of one character
counts as itself), leaving out bigrams of hiragana only (grammar, mostly).
A word matches the same word or an inflection of it: one a prefix of the
other with at most three letters more ("live" / "lives", "Hund" / "Hunde"),
or a shared start of five letters or more covering 70% of the longer one
("Москва" / "Москве", "programming" / "programmer"). A synonym is not
recognised ("physician" for "doctor"), nor a translation: an entry written in
another language than the person's is refused, so the jobs are told to write
in the person's words. This module is pure: text in, verdict out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.media.markers import VOICE_PREFIX, without_image_lines
from memory_core import STOPWORDS

MIN_WORD_CHARS = 3
INFLECTION_CHARS = 3  # "live" -> "lives", "prefer" -> "prefers", "Hund" -> "Hunde"
STEM_CHARS = 5
STEM_SHARE = 0.7

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
_HIRAGANA = re.compile("[\u3040-\u309f]+")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CJK_META = re.compile("用户|用戶|使用者|ユーザー|ユーザ|사용자|유저")
_QUOTED = re.compile(r"^\s*>")

_OTHER_STOPWORDS = """
    le la les un une des du de et ou est sont pour dans sur avec pas que qui mais très
    elle il ils elles nous vous mon ma mes son sa ses leur aux ce cette ces être avoir
    der die das ein eine einen einem und oder ist sind für mit nicht auch ich mein meine
    sie wir ihr dem den des von zu bei aus sehr aber wie noch habe hat haben
    el los las una unos unas y o es son para con por que muy pero mi mis su sus yo del
    al lo le les tengo tiene soy estoy está
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
    likes like liked prefers prefer preferred wants want wanted enjoys enjoy enjoyed
    name named called goes usually often always never currently mentioned said says
    utilisateur utilisatrice benutzer benutzerin nutzer usuario usuaria utente
    usuário usuária пользователь пользователя пользовательница
"""
IGNORED = STOPWORDS | frozenset(_OTHER_STOPWORDS.split()) | frozenset(_META.split())
"""Words never distinctive: stopwords of the languages served, and words about the person."""


@dataclass(frozen=True)
class Support:
    """The verdict on one entry: its distinctive words, and those the person never said."""

    words: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def supported(self) -> bool:
        found = len(self.words) - len(self.missing)
        numbers_said = not any(_is_number(w) for w in self.missing)
        return found >= 1 and 2 * found >= len(self.words) and numbers_said

    def reason(self) -> str:
        """Why an unsupported entry was refused, in one line."""
        if not self.words:
            return "it has no word of its own to check against what the person said"
        return "the person never said " + ", ".join(f"'{w}'" for w in self.missing)


class OwnWords:
    """What a person said in one stretch, as the words `check` looks entries up in."""

    def __init__(self, texts: Iterable[str]) -> None:
        """`texts`: the person's own messages (not forwarded; quoted lines, a picture's
        description and a transcript's marker are left out here)."""
        self._words: set[str] = set()
        for text in texts:
            said = without_voice_marks(without_image_lines(without_quotes(text)))
            self._words.update(_tokens(said, entry=False))
        self._sorted = sorted(w for w in self._words if not _is_number(w))

    def __contains__(self, word: str) -> bool:
        if word in self._words:
            return True
        if _is_number(word) or _is_cjk(word):
            return False
        return any(_inflection(word, said) for said in self._near(word))

    def _near(self, word: str) -> list[str]:
        # The words sharing `word`'s first three letters; they sort together.
        start = word[:MIN_WORD_CHARS]
        low = _bisect(self._sorted, start)
        near = []
        for said in self._sorted[low:]:
            if not said.startswith(start):
                break
            near.append(said)
        return near


def check(entry: str, said: OwnWords) -> Support:
    """Whether `entry` is supported by `said` (see the module doc)."""
    words = tuple(dict.fromkeys(_tokens(entry, entry=True)))
    return Support(words, tuple(w for w in words if w not in said))


def distinctive_words(text: str) -> tuple[str, ...]:
    """The words of `text` an entry is checked by, in order, once each."""
    return tuple(dict.fromkeys(_tokens(text, entry=True)))


def without_quotes(text: str) -> str:
    """`text` without its quoted lines ("> ..."), and without everything after a ">>> "
    (Discord's quote of the rest of the message)."""
    kept = []
    for line in text.splitlines():
        if line.lstrip().startswith(">>> "):
            break
        if not _QUOTED.match(line):
            kept.append(line)
    return "\n".join(kept)


def without_voice_marks(text: str) -> str:
    """`text` without the marker that starts a transcript's line ("[voice note] "): what
    follows it is what the person said."""
    return "\n".join(line.removeprefix(VOICE_PREFIX) for line in text.split("\n"))


def _tokens(text: str, *, entry: bool) -> list[str]:
    text = unicodedata.normalize("NFKC", text).casefold()
    if entry:  # a CJK word about the person has no spaces around it to split it off
        text = _CJK_META.sub(" ", text)
    tokens: list[str] = []
    for match in _TOKEN.finditer(text):
        if match.group("cjk"):
            tokens.extend(_bigrams(match.group("cjk"), entry=entry))
        elif match.group("number"):
            tokens.append(match.group("number"))
        else:
            word = match.group("word")
            if entry and (len(word) < MIN_WORD_CHARS or word in IGNORED):
                continue
            tokens.append(word)
    return tokens


def _bigrams(run: str, *, entry: bool) -> list[str]:
    if len(run) == 1:  # one kana or Hangul syllable alone is grammar (a particle)
        return [run] if not entry or _HAN.fullmatch(run) else []
    grams = [run[i : i + 2] for i in range(len(run) - 1)]
    if entry:  # what the person said keeps them all: an entry's bigram may be one of them
        grams = [g for g in grams if not _HIRAGANA.fullmatch(g)]
    return grams


def _inflection(a: str, b: str) -> bool:
    shorter, longer = sorted((a, b), key=len)
    shared = _common_prefix(shorter, longer)
    if shared == len(shorter) and len(longer) - shared <= INFLECTION_CHARS:
        return True
    return shared >= STEM_CHARS and shared >= STEM_SHARE * len(longer)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _bisect(words: list[str], start: str) -> int:
    low, high = 0, len(words)
    while low < high:
        middle = (low + high) // 2
        if words[middle] < start:
            low = middle + 1
        else:
            high = middle
    return low


def _is_number(word: str) -> bool:
    return word[:1].isdigit()


def _is_cjk(word: str) -> bool:
    return re.fullmatch(f"[{_CJK}]+", word) is not None

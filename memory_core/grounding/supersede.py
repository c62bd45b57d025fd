"""Stale facts: does a new entry about a person state a new value for what one of their
entries states?

`superseded(new, entries)` names the entry that `new` replaces, or None. The match
is kept conservative on purpose, since a wrong match loses a true fact: it applies
only to facts that hold one value at a time, and only when everything but the value
is the same.

- Both entries are reduced to their distinctive words (`distinctive_words`), with
  the words of a one-value relation replaced by the relation's name: where a person
  lives ("lives", "moved", "vivo", "me mudé", "wohne", "habite", 住在, 搬到…), what they
  work as ("works", "job", "trabajo", "arbeite", "travaille", 工作…), their age
  ("years old", "años", 岁…), what they are called ("name", "llamo", "heiße", 叫…) and a
  favourite ("favourite", "favorito", "Lieblings…", 最喜欢…).
- They match when they hold the same relation, have the same number of words, and
  differ in exactly one word, the value: a number ("Is 34 years old" / "Is 35 years
  old"), or the last word when both are written as names after the same preposition
  (in, to, at… count as one for a place): "Lives in Lisbon" / "Moved to Porto", not
  "lives with a cat", "lives alone", "works at Google" / "works with Python" or "works
  as a nurse" / "works as a teacher" (a lower-case value is left as an add). Without a
  one-value relation only a changed number matches ("Takes 20 mg of sertraline" /
  "Takes 25 mg of sertraline"): "Speaks French" and "Speaks German" are two facts.
- In Chinese and Japanese, where words are not spaced, an entry holding a relation's
  marker matches another holding the same marker, with the same text before it and a
  different text after it ("用户住在里斯本" / "搬到波尔图", not "我的狗叫…" / "我的猫叫…").
- More than one candidate: none (the model's add stays an add).

What it cannot tell: a second home ("also lives in Porto") is taken as a move; a
relation named by a word not listed here is not recognised and is left as an add.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory_core.grounding.words import distinctive_words, same_word

_RELATIONS: dict[str, tuple[str, ...]] = {
    "residence": (
        "live", "lives", "living", "lived", "moved", "move", "moving", "relocated",
        "resides", "reside", "based", "vivo", "vive", "vivía", "mudé", "mudó", "mudado",
        "resido", "reside", "habite", "habites", "déménagé", "wohne", "wohnt", "umgezogen",
        "lebe", "lebt", "abito", "abita", "moro", "mora", "живу", "живёт", "живет",
        "переехал", "переехала",
    ),
    "work": (
        "works", "work", "working", "job", "employed", "profession", "trabajo", "trabaja",
        "trabajando", "travaille", "arbeite", "arbeitet", "beruf", "lavoro", "lavora",
        "trabalho", "trabalha", "работаю", "работает",
    ),
    "age": ("age", "aged", "years", "años", "edad", "ans", "jahre", "anni", "anos", "лет"),
    "name": ("name", "llamo", "nombre", "appelle", "heiße", "heißt"),
    "favourite": (
        "favourite", "favorite", "favorito", "favorita", "préféré", "préférée",
        "lieblings", "preferito", "preferita", "любимый", "любимая",
    ),
}  # fmt: skip
_CJK_RELATIONS: dict[str, tuple[str, ...]] = {
    "residence": ("住在", "搬到", "搬去", "住於", "に住んで", "に引っ越し"),
    "work": ("工作", "职业", "職業", "で働いて"),
    "age": ("岁", "歲", "歳"),
    "name": ("叫", "名字", "と申します"),
    "favourite": ("最喜欢", "最喜歡", "一番好き"),
}
_WORD_RELATION = {word: name for name, words in _RELATIONS.items() for word in words}
_PLACE = frozenset(("in", "to", "into", "at", "en", "a", "à", "nach", "zu", "em", "para", "в"))
_RAW_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_META = re.compile("用户|用戶|使用者|ユーザー|ユーザ|[。.!！\\s]")


def superseded(new: str, entries: Sequence[str]) -> str | None:
    """The one entry of `entries` that `new` states a new value for, or None."""
    found = [old for old in entries if old != new and _same_fact(new, old)]
    return found[0] if len(found) == 1 else None


def _same_fact(new: str, old: str) -> bool:
    if _CJK.search(new) and _CJK.search(old):
        return _same_cjk_fact(new, old)
    a, b = _shape(new), _shape(old)
    if len(a) != len(b) or len(a) < 2:
        return False
    differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if not _same(x, y)]
    if len(differ) != 1:
        return False
    i = differ[0]
    if _is_number(a[i]) and _is_number(b[i]):
        return True
    relation = any(w.startswith("<") for w in a)
    if not relation or i != len(a) - 1 or a[i].startswith("<"):
        return False
    return _same_frame(_frame(new, a[i]), _frame(old, b[i]))


def _frame(text: str, value: str) -> tuple[str, bool] | None:
    """The word before `value` in `text` (lower case) and whether `value` is written as a
    name (capitalised); None when it cannot be found as written."""
    words = _RAW_WORD.findall(text)
    for before, word in zip(["", *words], words, strict=False):
        if word.casefold() == value:
            return before.casefold(), word[:1].isupper()
    return None


def _same_frame(a: tuple[str, bool] | None, b: tuple[str, bool] | None) -> bool:
    """Both values are names after the same preposition (in, to, at… count as one for a
    place): "Lives in Lisbon" / "Moved to Porto", not "lives with a cat", "works at
    Google" / "works with Python"."""
    if a is None or b is None or not (a[1] and b[1]):
        return False
    return a[0] == b[0] or (a[0] in _PLACE and b[0] in _PLACE)


def _shape(text: str) -> list[str]:
    """The distinctive words with a relation's words folded into its name, once."""
    shaped: list[str] = []
    for word in distinctive_words(text):
        relation = _WORD_RELATION.get(word)
        if relation is None and word.startswith("lieblings"):
            relation = "favourite"
        token = f"<{relation}>" if relation is not None else word
        if not shaped or shaped[-1] != token:
            shaped.append(token)
    return shaped


def _same_cjk_fact(new: str, old: str) -> bool:
    for markers in _CJK_RELATIONS.values():
        a, b = _split(new, markers), _split(old, markers)
        if a is not None and b is not None:
            return a[0] == b[0] and bool(a[1]) and bool(b[1]) and a[1] != b[1]
    return False


def _split(text: str, markers: tuple[str, ...]) -> tuple[str, str] | None:
    """What precedes and what follows the first of `markers` in `text`, without the
    words about the person (None: it holds none)."""
    for marker in markers:
        at = text.find(marker)
        if at >= 0:
            return _META.sub("", text[:at]), _META.sub("", text[at + len(marker) :])
    return None


def _same(a: str, b: str) -> bool:
    return a == b or (not a.startswith("<") and not b.startswith("<") and same_word(a, b))


def _is_number(word: str) -> bool:
    return word[:1].isdigit()

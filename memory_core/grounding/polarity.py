"""Small per-language word lists for the mood of a clause: does it negate, does it ask,
is it said of someone else.

The grounding check (`check`) reads a clause of the person's as a statement about
themselves only when none of these lists says otherwise. One small list per language:
the languages the bot's catalogs ship (English, Spanish, Chinese) and those the
stopwords serve (French, German, Italian, Portuguese, Russian; a few Hindi and Arabic
negations; Japanese and Korean where a marker is cheap to see). The lists are joined,
since a message does not say which language it is in, so a word is left out where it
means something ordinary in another language (Italian "mai" is German "Mai").

- NEGATION: a clause word that negates what follows it in the clause ("I do not live
  in Zanzibar", "no tengo perro"); one that ends its clause negates the whole clause
  ("Ich mag Kaffee nicht", "好きじゃない"); a clause that is only a negation ("nope",
  NEGATION_PHRASES: "no way", "para nada", 才不) negates the clause before it when that
  one asks or is of the same sentence ("diabetes? no way", "I live in Berlin, nope").
  "n't" is read as "not". In Chinese, Japanese and Korean a negation is a character
  or a few inside a run (不, 没有, 别, ない, 않): compounds that do not negate (不错,
  不过, 差不多) and the A-not-A question (是不是, 有没有) are set apart.
- ASKING: words that head a clause that asks ("guess", "do I", "adivina", "est-ce
  que", "猜"), words that make a clause a question or a supposition wherever they stand
  ("if", "wenn", "ли", 如果), and endings that ask (吗, か). A clause ending in "?" or
  "？", and everything from "¿" to the end of its sentence, asks too.
- THIRD_PARTY: kin and other people, and the pronouns he and she ("my sister", "mi
  hermana", 妹妹, 他). After a companion word ("with my sister", "con mi hermana",
  我和妹妹) the person is the subject and the other is company, so it does not count,
  unless a relative pronoun (RELATIVE: "who", "quien", "qui") makes the other the
  subject of what follows ("with my sister, who is a nurse").

What these lists cannot catch: sarcasm and irony ("oh sure, I just LOVE queues");
a negation far from the words it denies, in another clause or message ("that thing
about me and Zanzibar? not true"); a negation that is a word of its own (doubt,
deny, "hardly", "rarely", "used to"); double negation ("I can't not drink coffee");
a negation that restricts rather than denies (French "ne … que": "je ne bois que du
thé" reads as not drinking tea); hypotheticals and wishes without a listed word ("I'd
love to live in Zanzibar one day"); a question without a question mark or a listed
head; reported speech, either way ("my wife says I snore" is refused as said of the
wife, and so is "I told my mum I'm moving to Glasgow", the mum taken for the
subject); a subject named in a clause before ("my friend, who is a nurse, lives
here" grounds "lives here"); a third party named only by name ("Anna is allergic to
nuts"); the pronouns "they" and "her", which entries use for the person themselves;
a relative clause opened by a word not listed (German "der", Italian "che": "ich
wohne mit meiner Schwester, die Ärztin ist" grounds "ist Ärztin"); and any language
or dialect whose words are not listed here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

NEGATION: dict[str, tuple[str, ...]] = {
    "en": ("not", "no", "never", "nothing", "nobody", "none", "neither", "nor", "nope",
           "nah", "cannot", "without"),
    "es": ("no", "nunca", "jamás", "jamas", "ni", "nada", "ningún", "ninguno", "ninguna",
           "tampoco", "sin"),
    "fr": ("ne", "n", "pas", "jamais", "rien", "aucun", "aucune", "sans", "non"),
    "de": ("nicht", "kein", "keine", "keinen", "keinem", "keiner", "keines", "nie",
           "niemals", "nichts", "nein", "ohne"),
    "it": ("non", "nessuno", "nessuna", "niente", "nulla", "senza"),
    "pt": ("não", "nunca", "jamais", "nem", "nenhum", "nenhuma", "sem"),
    "ru": ("не", "нет", "никогда", "ни", "без", "ничего"),
    "hi": ("नहीं", "मत", "न"),
    "ar": ("لا", "لم", "لن", "ليس", "ليست"),
}  # fmt: skip
"""Words that negate, by language."""

NEGATION_PHRASES: dict[str, tuple[str, ...]] = {
    "en": ("no way", "not really", "not at all", "no chance", "of course not", "hell no"),
    "es": ("para nada", "ni hablar", "de ninguna manera", "qué va"),
    "fr": ("pas du tout", "pas vraiment", "mais non"),
    "de": ("auf keinen fall", "gar nicht", "überhaupt nicht", "nicht wirklich"),
    "it": ("per niente", "neanche per sogno"),
    "pt": ("de jeito nenhum", "nem pensar"),
    "ru": ("ни за что", "вовсе нет"),
}
"""Phrases that are a negation as a whole ("no way" is not about a way)."""

NEGATION_CJK: dict[str, tuple[str, ...]] = {
    "zh": ("不", "没", "沒", "别", "別", "未", "无", "無", "非"),
    "ja": ("ない", "なかった", "ません"),
    "ko": ("않", "없", "못", "안 "),
}
"""Negations inside a run of Chinese, Japanese or Korean, by language."""

NOT_NEGATION_CJK = (
    "不错", "不錯", "不过", "不過", "不久", "不同", "差不多", "不少", "不但", "不仅",
    "不僅", "不得不", "非常", "无论", "無論", "没关系", "안녕",
)  # fmt: skip
"""Compounds that hold a negation character and do not negate ("not bad" is good)."""

ASKING: dict[str, tuple[str, ...]] = {
    "en": ("guess", "can you guess", "do i", "am i", "did i", "have i", "was i",
           "should i", "could i", "can i", "would i", "will i", "do you think i",
           "is it true", "whether", "what if"),
    "es": ("adivina", "adivinas", "adivinen", "crees que", "será que", "acaso", "si"),
    "fr": ("devine", "devinez", "est ce que", "suis je", "ai je", "si"),
    "de": ("rate", "rat mal", "bin ich", "habe ich", "hab ich", "soll ich", "kann ich",
           "weisst du", "glaubst du", "ob"),
    "it": ("indovina", "secondo te"),
    "pt": ("adivinha", "será que", "você acha"),
    "ru": ("угадай", "как думаешь"),
    "zh": ("猜", "你猜", "难道", "難道"),
    "ja": ("当てて",),
}  # fmt: skip
"""Words that head a clause that asks (matched at its start), by language."""

SUPPOSING: dict[str, tuple[str, ...]] = {
    "en": ("if",),
    "de": ("wenn", "falls"),
    "ru": ("ли", "если"),
    "zh": ("如果", "要是", "假如", "是否"),
    "ja": ("もし",),
}
"""Words that make a clause a question or a supposition wherever they stand."""

ASKING_ENDS: dict[str, tuple[str, ...]] = {
    "zh": ("吗", "嗎"),
    "ja": ("か", "かな"),
    "ko": ("까",),
}
"""Endings that make a clause a question, by language."""

THIRD_PARTY: dict[str, tuple[str, ...]] = {
    "en": ("sister", "brother", "mother", "mom", "mum", "father", "dad", "son",
           "daughter", "wife", "husband", "boyfriend", "girlfriend", "partner", "friend",
           "cousin", "aunt", "uncle", "grandma", "grandmother", "grandpa", "grandfather",
           "niece", "nephew", "colleague", "coworker", "boss", "neighbour", "neighbor",
           "roommate", "kid", "kids", "child", "children", "baby", "parents"),
    "es": ("hermana", "hermano", "madre", "mamá", "padre", "papá", "hijo", "hija", "esposa",
           "esposo", "marido", "novio", "novia", "amigo", "amiga", "primo", "prima", "tío",
           "tía", "abuela", "abuelo", "jefe", "jefa", "vecino", "vecina", "compañero",
           "compañera", "padres", "hijos"),
    "fr": ("sœur", "soeur", "frère", "mère", "père", "fils", "fille", "mari", "copain",
           "copine", "ami", "amie", "cousin", "cousine", "oncle", "tante", "collègue",
           "voisin", "voisine", "parents", "enfants"),
    "de": ("schwester", "bruder", "mutter", "mama", "vater", "papa", "sohn", "tochter",
           "freund", "freundin", "kollege", "kollegin", "nachbar", "nachbarin", "oma",
           "opa", "onkel", "tante", "eltern", "kinder", "kind"),
    "it": ("sorella", "fratello", "madre", "padre", "figlio", "figlia", "moglie",
           "marito", "amico", "amica", "nonna", "nonno"),
    "pt": ("irmã", "irmão", "mãe", "pai", "filho", "filha", "esposa", "marido",
           "namorado", "namorada", "amigo", "amiga"),
    "ru": ("сестр", "брат", "мам", "мать", "пап", "отец", "отц", "сын", "доч", "жен",
           "муж", "друг", "подруг"),
}  # fmt: skip
"""Kin and other people, by language (Russian: word starts, for its cases)."""

PRONOUNS: dict[str, tuple[str, ...]] = {
    "en": ("he", "she", "his"),
    "es": ("él", "ella"),
    "fr": ("elle",),
    "de": ("er", "sie"),
    "it": ("lui",),
    "pt": ("ele", "ela"),
    "ru": ("он", "она"),
}
"""He and she: another person, unless the entry itself names someone else."""

THIRD_PARTY_CJK: dict[str, tuple[str, ...]] = {
    "zh": ("妈", "媽", "爸", "哥", "弟", "姐", "妹", "母亲", "父亲", "儿子", "女儿", "老婆",
           "老公", "妻子", "丈夫", "朋友", "同事", "邻居", "老板", "孩子", "爷爷", "奶奶"),
    "ja": ("母", "父", "兄", "姉", "息子", "娘", "夫", "妻", "友達", "同僚"),
    "ko": ("엄마", "아빠", "언니", "오빠", "누나", "동생", "친구", "남편", "아내"),
}  # fmt: skip
"""Kin and other people inside a run of Chinese, Japanese or Korean."""

PRONOUNS_CJK = ("他", "她", "彼")
NOT_THIRD_PARTY_CJK = ("其他", "其它", "吉他")

COMPANION: dict[str, tuple[str, ...]] = {
    "en": ("with",),
    "es": ("con",),
    "fr": ("avec",),
    "de": ("mit",),
    "it": ("con",),
    "pt": ("com",),
    "ru": ("с", "со"),
    "zh": ("和", "跟", "与", "與", "同", "陪"),
}
"""Words after which a third party is company, not the subject ("with my sister")."""

RELATIVE: dict[str, tuple[str, ...]] = {
    "en": ("who", "whom", "whose"),
    "es": ("quien", "quienes"),
    "fr": ("qui",),
    "pt": ("quem",),
    "ru": ("который", "которая", "которое", "которые"),
}
"""Words that open a clause about the person just named ("my sister, who is a nurse"):
the third parties before them, company included, count in what follows."""


def _words(lists: dict[str, tuple[str, ...]], *, cjk: bool = False) -> frozenset[str]:
    langs = ("zh", "ja", "ko")
    return frozenset(w for lang, ws in lists.items() for w in ws if (lang in langs) == cjk)


NEGATION_WORDS = _words(NEGATION)
_NEG_PREFIX = ("kein",)


def _by_first_word(heads: frozenset[str]) -> dict[str, tuple[tuple[str, ...], ...]]:
    found: dict[str, tuple[tuple[str, ...], ...]] = {}
    for head in sorted({tuple(h.split()) for h in heads}, key=len, reverse=True):
        found[head[0]] = (*found.get(head[0], ()), head)
    return found


_HEADS = _by_first_word(_words(ASKING))
_HEADS_CJK = _words(ASKING, cjk=True)
_SUPPOSING = _words(SUPPOSING)
_SUPPOSING_CJK = _words(SUPPOSING, cjk=True)
_ENDS_CJK = tuple(w for ws in ASKING_ENDS.values() for w in ws)
_OTHERS = _words(THIRD_PARTY)
_OTHER_PREFIXES = tuple(THIRD_PARTY["ru"])
_PRONOUNS = _words(PRONOUNS)
_COMPANIONS = _words(COMPANION)
_RELATIVES = _words(RELATIVE)
_COMPANIONS_CJK = "".join(COMPANION["zh"])


def _alternation(words: Iterable[str]) -> re.Pattern[str]:
    ordered = sorted(words, key=len, reverse=True)
    return re.compile("|".join(re.escape(w) for w in ordered))


_NEG_PHRASE = re.compile(rf"\b(?:{_alternation(_words(NEGATION_PHRASES)).pattern})\b")
_NEG_CJK = _alternation({w for ws in NEGATION_CJK.values() for w in ws})
_NOT_NEG_CJK = _alternation(NOT_NEGATION_CJK)
_A_NOT_A = re.compile(r"([\u3400-\u9fff])[不没沒]\1")
_OTHER_CJK = _alternation({w for ws in THIRD_PARTY_CJK.values() for w in ws})
_PRONOUN_CJK = _alternation(PRONOUNS_CJK)
_NOT_OTHER_CJK = _alternation(NOT_THIRD_PARTY_CJK)
_SUPPOSE_CJK = _alternation(_SUPPOSING_CJK)
_ENDING_MARKS = re.compile(r"[\s.!。！…~～)）」』\"'”’]+$")


class Word(NamedTuple):
    """A token of a clause as `mood` reads it: its text, where it starts in the clause,
    whether it is a CJK run's piece, and whether an entry could hold it as a word."""

    text: str
    start: int
    cjk: bool
    distinctive: bool


@dataclass(frozen=True)
class Mood:
    """What a clause says of its words: `negated_from` (the offset from which its
    words are negated, None: none), `negation_only` (it is nothing but a negation,
    "no way"), `asks`, `heads_question` (it opens a question that runs to the end of its
    sentence), `others` (third parties named in it), `pronouns` (he, she), `company`
    (third parties named as company, "with my sister"), `relative` (it opens with a
    relative pronoun, "who is a nurse")."""

    negated_from: int | None
    negation_only: bool
    asks: bool
    heads_question: bool
    others: frozenset[str]
    pronouns: frozenset[str]
    company: frozenset[str] = frozenset()
    relative: bool = False


def mood(text: str, words: Sequence[Word]) -> Mood:
    """The mood of one clause: `text` normalised (NFKC, casefolded), `words` its tokens."""
    negations = _negations(text, words)
    spans = [(m.start(), m.end()) for m in _NEG_PHRASE.finditer(text)]
    spans += negation_spans(text)
    after = [
        w
        for w in words
        if w.distinctive
        and not _is_negation(w.text)
        and not any(s < w.start + len(w.text) and w.start < e for s, e in spans)
    ]
    negated_from: int | None = None
    if negations:
        first = negations[0]
        # A negation that nothing follows negates the whole clause ("mag Kaffee nicht").
        negated_from = first if any(w.start > first for w in after) else 0
    heads = _heads(text, words)
    others, company = _others(text, words)
    return Mood(
        negated_from=negated_from,
        negation_only=bool(negations) and not after,
        asks=heads or _supposes(text, words) or _asks_at_end(text),
        heads_question=heads,
        others=others,
        pronouns=_pronouns(text, words),
        company=company,
        relative=bool(words) and not words[0].cjk and words[0].text in _RELATIVES,
    )


def negation_spans(text: str) -> list[tuple[int, int]]:
    """Where the CJK negations of `text` are (an entry's bigrams over them are left out:
    the negation is the entry's polarity, not one of its words)."""
    return [(m.start(), m.end()) for m in _cjk_negations(text)]


def _is_negation(word: str) -> bool:
    return word in NEGATION_WORDS or word.startswith(_NEG_PREFIX)


def _negations(text: str, words: Sequence[Word]) -> list[int]:
    found = [w.start for w in words if not w.cjk and _is_negation(w.text)]
    found.extend(m.start() for m in _cjk_negations(text))
    return sorted(found)


def _cjk_negations(text: str) -> list[re.Match[str]]:
    masked = _mask(text, _NOT_NEG_CJK)
    masked = _A_NOT_A.sub(lambda m: "\0" * len(m.group()), masked)
    return list(_NEG_CJK.finditer(masked))


def _mask(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: "\0" * len(m.group()), text)


def _heads(text: str, words: Sequence[Word]) -> bool:
    if words and not words[0].cjk:
        latin = [w.text for w in words[:4]]
        if any(tuple(latin[: len(h)]) == h for h in _HEADS.get(latin[0], ())):
            return True
    stripped = text.lstrip()
    return any(stripped.startswith(h) for h in _HEADS_CJK) or "¿" in text


def _supposes(text: str, words: Sequence[Word]) -> bool:
    if any(not w.cjk and w.text in _SUPPOSING for w in words):
        return True
    return _SUPPOSE_CJK.search(text) is not None or _A_NOT_A.search(text) is not None


def _asks_at_end(text: str) -> bool:
    end = _ENDING_MARKS.sub("", text)
    return end.endswith(("?", "？")) or end.endswith(_ENDS_CJK)


def _others(text: str, words: Sequence[Word]) -> tuple[frozenset[str], frozenset[str]]:
    """The third parties of a clause: (those that may be its subject, those named as
    company). Company followed by a relative pronoun ("with my sister who is …") is
    the subject of what follows."""
    others: set[str] = set()
    company: set[str] = set()
    for i, w in enumerate(words):
        other = "" if w.cjk else _other(w.text)
        if other:
            relative = any(not v.cjk and v.text in _RELATIVES for v in words[i + 1 :])
            (company if _with(words, i) and not relative else others).add(other)
    masked = _mask(text, _NOT_OTHER_CJK)
    for m in _OTHER_CJK.finditer(masked):
        near = masked[max(0, m.start() - 2) : m.start()]
        (company if any(c in _COMPANIONS_CJK for c in near) else others).add(m.group())
    return frozenset(others), frozenset(company)


def _other(word: str) -> str:
    if word in _OTHERS:
        return word
    if word.endswith("s") and word[:-1] in _OTHERS:
        return word[:-1]
    if word.startswith(_OTHER_PREFIXES):
        return next(p for p in _OTHER_PREFIXES if word.startswith(p))
    return ""


def _with(words: Sequence[Word], i: int) -> bool:
    return any(w.text in _COMPANIONS for w in words[max(0, i - 2) : i] if not w.cjk)


def _pronouns(text: str, words: Sequence[Word]) -> frozenset[str]:
    found = {w.text for w in words if not w.cjk and w.text in _PRONOUNS}
    found.update(m.group() for m in _PRONOUN_CJK.finditer(_mask(text, _NOT_OTHER_CJK)))
    return frozenset(found)

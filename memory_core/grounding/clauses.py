"""A message cut into clauses, each with its words and its mood.

Sentences end at ". ", "?", "!", "。", "？", "！", "…" and line breaks; a sentence is cut
into clauses at commas, semicolons and colons (also their full-width forms and 、) and
before the usual conjunctions that start a clause of their own ("but", "because",
"pero", "aunque", "aber", "weil", 但是, 不过, 因为, でも …). "and" does not cut: "I do
not eat meat and fish" keeps "fish" under its "not". Conjunctions that also mean
something else in a language served ("mais" is French "but" and Portuguese "more",
"ma" is Italian "but" and French "my") are not listed: a cut in the wrong place would
end a negation early.

The mood of a clause (`polarity.mood`) is then settled within its sentence and
message: a question opened by an asking word or "¿" runs to the end of a sentence
that ends with "?"; a clause that is only a negation ("no way", "nope") negates the
clause just before it when that one asks or is of the same sentence ("diabetes? no
way", "I live in Berlin, nope"), not a statement of the sentence before ("I live in
Sevilla. No, not Madrid"); a clause opened by a relative pronoun ("who is a nurse")
is about the third parties of the clause before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from memory_core.grounding.polarity import Mood, Word, mood
from memory_core.grounding.words import normalise, tokens

_SENTENCE = re.compile(r"[^\n]*?(?:[?？!！。…]+|\.(?=\s|$)|\n|$)")
_CUT = re.compile(
    r"[,;:，；：、]+\s*"
    r"|\s(?=(?:but|however|although|though|because|pero|aunque|sino|porque|"
    r"cependant|parce que|aber|sondern|jedoch|weil|però|perché|porém|но|однако|потому что)"
    r"\b)"
    r"|(?=但是|可是|不过|不過|然而|因为|因為|所以|でも|けど)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Clause:
    """One clause: where it is in the text it was cut from, its normalised text, its
    tokens (offsets into `norm`) and its mood."""

    start: int
    end: int
    norm: str
    words: tuple[Word, ...]
    mood: Mood

    def negates(self, word: Word) -> bool:
        """Whether this clause negates `word` (one of its own tokens)."""
        at = self.mood.negated_from
        return at is not None and word.start >= at


def clauses(text: str) -> tuple[Clause, ...]:
    """`text` cut into clauses, with each clause's mood settled (see the module doc)."""
    found: list[Clause] = []
    sentences: list[int] = []  # the sentence of each clause
    for n, sentence in enumerate(_SENTENCE.finditer(text)):
        if sentence.group().strip():
            cut = _settled(_sentence(text, sentence.start(), sentence.end()))
            found.extend(cut)
            sentences.extend([n] * len(cut))
    for i in range(1, len(found)):
        before, clause = found[i - 1], found[i]
        answers = before.mood.asks or sentences[i - 1] == sentences[i]
        if clause.mood.negation_only and answers:
            found[i - 1] = replace(before, mood=replace(before.mood, negated_from=0))
        if clause.mood.relative:  # "my sister, who is a nurse": the nurse is the sister
            named = before.mood.others | before.mood.company
            found[i] = replace(clause, mood=replace(clause.mood, others=clause.mood.others | named))
    return tuple(found)


def _sentence(text: str, start: int, end: int) -> list[Clause]:
    found = []
    at = start
    for cut in [*_CUT.finditer(text, start, end), None]:
        stop = end if cut is None else cut.start()
        if text[at:stop].strip():
            found.append(_clause(text, at, stop))
        if cut is not None:
            at = cut.end()
    return found


def _clause(text: str, start: int, end: int) -> Clause:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    norm = normalise(text[start:end])
    words = tuple(tokens(norm, entry=False))
    return Clause(start, end, norm, words, mood(norm, words))


def _settled(sentence: list[Clause]) -> list[Clause]:
    """A question opened in a sentence that ends asking runs to its end."""
    if not sentence or not sentence[-1].mood.asks:
        return sentence
    opened = next((i for i, c in enumerate(sentence) if c.mood.heads_question), None)
    if opened is None:
        return sentence
    return [
        replace(c, mood=replace(c.mood, asks=True)) if i >= opened else c
        for i, c in enumerate(sentence)
    ]

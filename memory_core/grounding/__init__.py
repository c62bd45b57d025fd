"""Grounding: is what an entry says about a person something that person said?

`check(entry, OwnWords(messages))` gives a `Support`: grounded (with the messages and
clauses that ground it as `Evidence`) or refused with its `Verdict` (not said, said
the opposite, asked, said of someone else, no word to check) and the closest
message. `superseded` tells whether a new entry states a new value for an old one.
The modules: `words` (tokens, distinctive words, inflections), `polarity` (the
per-language lists of negation, asking and third parties), `clauses` (a message
cut into clauses with their mood), `check`, `supersede`. Pure: text in, verdict out.
"""

from memory_core.grounding.check import (
    OwnWords,
    Said,
    Support,
    Verdict,
    check,
    without_quotes,
)
from memory_core.grounding.supersede import superseded
from memory_core.grounding.words import distinctive_words, same_word

__all__ = [
    "OwnWords",
    "Said",
    "Support",
    "Verdict",
    "check",
    "distinctive_words",
    "same_word",
    "superseded",
    "without_quotes",
]

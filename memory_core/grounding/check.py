"""The grounding check: is an entry about a person something that person said?

An entry is grounded only when all of its distinctive words (`words`) occur, as said
or inflected, in one message of the person's own or in two consecutive ones, and each
of them sits in at least one clause there that states it with the entry's polarity,
of the person: not a clause that negates it while the entry does not, or the reverse
("opposite"), not one that asks ("asked"), not one whose subject is a third party the
entry does not itself name ("someone_else"; `polarity` has the lists and what they
cannot catch). Every candidate (each message, then each consecutive pair) is tried;
the first that grounds the entry gives its evidence, one `Evidence` per message with
the clauses that held the words. Otherwise the verdict is the failing reason of the
candidate that covered most words, and `closest` the message of it that held most.

The person's words (`OwnWords`) are their own messages in order, already without
anything that is not theirs (the assistant's replies, tool output, forwarded
messages, a picture's description): the caller passes only those. Quoted lines
("> …", and everything after Discord's ">>> ") are left out here. Each message's words
are indexed (word -> messages) and the message is cut into clauses once, when a check
first needs it, so a check against a long session looks up a few words rather than
reading every message. This module is pure:
text in, verdict out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, cast

from memory_core.file_memory.origin import EVIDENCE_SPAN_CHARS, Evidence
from memory_core.grounding.clauses import Clause, clauses
from memory_core.grounding.polarity import Word
from memory_core.grounding.words import CJK_META, WordIndex, normalise, said_words, tokens

Verdict = Literal["grounded", "not_said", "opposite", "asked", "someone_else", "no_words"]

_QUOTED = re.compile(r"^\s*>")
_RANK = {"not_said": 0, "someone_else": 1, "asked": 2, "opposite": 3}  # a stronger reason wins


@dataclass(frozen=True)
class Said:
    """One of the person's own messages: its stored id and its text (without markers)."""

    message_id: int
    text: str


@dataclass(frozen=True)
class Support:
    """The verdict on one entry.

    `words`: its distinctive words; `missing`: those the closest candidate lacks;
    `evidence`: for a grounded entry, each supporting message with the clauses that
    held its words; `closest`: for a refused one, the message that came nearest;
    `apart`: of `missing`, the words the person did say, elsewhere."""

    words: tuple[str, ...]
    missing: tuple[str, ...]
    verdict: Verdict
    evidence: tuple[Evidence, ...] = ()
    closest: Evidence | None = None
    apart: tuple[str, ...] = ()

    @property
    def supported(self) -> bool:
        return self.verdict == "grounded"

    def reason(self) -> str:
        """Why the entry was refused, in one English line for the model."""
        quote = f" ({self.closest.span!r})" if self.closest is not None else ""
        if self.verdict == "no_words":
            return "it has no word of its own to check against what the person said"
        if self.verdict == "opposite":
            return f"the person said the opposite{quote}"
        if self.verdict == "asked":
            return f"the person asked, they did not say it{quote}"
        if self.verdict == "someone_else":
            return f"the person said it of someone else{quote}"
        if self.verdict == "grounded":
            return "the person said it"
        never = [w for w in self.missing if w not in self.apart]
        parts = []
        if never:
            parts.append("the person never said " + _listed(never))
        if self.apart:
            parts.append(
                f"the person did not say {_listed(self.apart)} in the same message as the "
                "rest (or the one next to it)"
            )
        return "; ".join(parts)


class OwnWords:
    """What a person said in one stretch: their own messages, in order, cut into
    clauses and indexed by word. A plain string gets its position as its id."""

    def __init__(self, messages: Iterable[Said | str], names: Iterable[str] = ()) -> None:
        """`names`: the person's own names (a display name): an entry may name them as it
        names "the user", so their words need no grounding."""
        self.names = frozenset(w for name in names for w in said_words(normalise(name)))
        self._said: list[Said] = []
        self._cut: dict[int, tuple[Clause, ...]] = {}
        self._index = WordIndex()
        for n, message in enumerate(messages):
            said = message if isinstance(message, Said) else Said(n, message)
            said = Said(said.message_id, without_quotes(said.text))
            for word in said_words(normalise(said.text)):
                self._index.add(word, len(self._said))
            self._said.append(said)

    def clauses(self, i: int) -> tuple[Clause, ...]:
        """The clauses of the `i`th message, cut when first asked for."""
        cut = self._cut.get(i)
        if cut is None:
            cut = self._cut[i] = clauses(self._said[i].text)
        return cut

    def __len__(self) -> int:
        return len(self._said)

    @property
    def messages(self) -> tuple[Said, ...]:
        """The messages as checked: quoted lines left out."""
        return tuple(self._said)


@dataclass(frozen=True)
class _Entry:
    words: tuple[str, ...]
    negated: dict[str, bool]
    others: frozenset[str]


@dataclass(frozen=True)
class _Verdict:
    """One candidate's judgement: the verdict, and per message the clauses it used."""

    verdict: Verdict
    used: dict[int, list[Clause]]


def check(entry: str, said: OwnWords) -> Support:
    """Whether `entry` is grounded in `said` (see the module doc)."""
    target = _entry(entry, said.names)
    if not target.words:
        return Support((), (), "no_words")
    found = {w: said._index.matches(w) for w in target.words}
    where = {w: said._index.places(found[w]) for w in target.words}
    nearest: tuple[int, ...] = ()  # the candidate that covered most words, if none all
    covering = 0
    refused: tuple[int, Support] | None = None
    for candidate in _candidates(where, len(said)):
        covered = sum(any(i in where[w] for i in candidate) for w in target.words)
        if covered < len(target.words):
            if covered > covering:
                nearest, covering = candidate, covered
            continue
        judged = _judge(target, candidate, found, said)
        if judged.verdict == "grounded":
            evidence = tuple(_evidence(said, i, cs) for i, cs in sorted(judged.used.items()))
            return Support(target.words, (), "grounded", evidence)
        rank = _RANK[judged.verdict]
        if refused is None or rank > refused[0]:
            closest = _closest(said, judged.used)
            refused = (rank, Support(target.words, (), judged.verdict, (), closest))
    if refused is not None:
        return refused[1]
    return _not_said(target, nearest, where, said)


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


def _entry(text: str, names: frozenset[str] = frozenset()) -> _Entry:
    """The entry's words with their polarity. The person's own names are left out where
    they name the person, at the start ("Alice keeps bees"), unless they are all it says
    ("Name: Ada" must be grounded by "Ada"); elsewhere they are words like any other (a
    display name "Rose Baker" grounds no "works as a baker")."""
    words: dict[str, bool] = {}
    subject: set[str] = set()
    others: set[str] = set()
    leading = True
    for clause in clauses(CJK_META.sub(" ", text)):
        others |= clause.mood.others
        for word in tokens(clause.norm, entry=True):
            if leading and word.text in names:
                subject.add(word.text)
                continue
            leading = False
            words.setdefault(word.text, clause.negates(word))
    if not words:
        words = dict.fromkeys(subject, False)
    return _Entry(tuple(words), words, frozenset(others))


def _candidates(where: dict[str, set[int]], count: int) -> list[tuple[int, ...]]:
    """Each message holding a word, then each consecutive pair around one."""
    touched = sorted(set().union(*where.values()))
    pairs = {(a, a + 1) for i in touched for a in (i - 1, i) if a >= 0 and a + 1 < count}
    return [(i,) for i in touched] + sorted(pairs)


def _judge(
    target: _Entry, candidate: Sequence[int], found: dict[str, frozenset[str]], said: OwnWords
) -> _Verdict:
    used: dict[int, list[Clause]] = {}
    failed: dict[int, list[Clause]] = {}
    worst = ""
    for word in target.words:
        reasons: dict[str, tuple[int, Clause]] = {}
        for i in candidate:
            for clause in said.clauses(i):
                for token in clause.words:
                    if token.text in found[word]:
                        reasons.setdefault(_status(clause, token, word, target), (i, clause))
        if "ok" in reasons:
            _add(used, *reasons["ok"])
            continue
        # No reason at all: the word was indexed across a cut that no clause holds.
        reason = max(reasons, key=lambda r: _RANK[r], default="not_said")
        if reason in reasons:
            _add(failed, *reasons[reason])
        if not worst or _RANK[reason] > _RANK[worst]:
            worst = reason
    if not worst:
        return _Verdict("grounded", used)
    return _Verdict(cast(Verdict, worst), failed)


def _status(clause: Clause, token: Word, word: str, target: _Entry) -> str:
    if clause.negates(token) != target.negated[word]:
        return "opposite"
    if clause.mood.asks:
        return "asked"
    if clause.mood.others - target.others or (clause.mood.pronouns and not target.others):
        return "someone_else"
    return "ok"


def _add(used: dict[int, list[Clause]], i: int, clause: Clause) -> None:
    held = used.setdefault(i, [])
    if clause not in held:
        held.append(clause)


def _not_said(
    target: _Entry, candidate: Sequence[int], where: dict[str, set[int]], said: OwnWords
) -> Support:
    covered = [w for w in target.words if any(i in where[w] for i in candidate)]
    missing = tuple(w for w in target.words if w not in covered)
    apart = tuple(w for w in missing if where[w])
    closest = None
    if candidate:
        nearest = max(candidate, key=lambda i: sum(i in where[w] for w in covered))
        closest = _evidence(said, nearest, [])
    return Support(target.words, missing, "not_said", (), closest, apart)


def _closest(said: OwnWords, failed: dict[int, list[Clause]]) -> Evidence | None:
    if not failed:
        return None
    i = max(failed, key=lambda n: len(failed[n]))
    return _evidence(said, i, failed[i])


def _evidence(said: OwnWords, i: int, held: list[Clause]) -> Evidence:
    message = said._said[i]
    if not held:
        return Evidence(message.message_id, _trimmed(message.text.strip()))
    start = min(c.start for c in held)
    end = max(c.end for c in held)
    return Evidence(message.message_id, _trimmed(message.text[start:end]))


def _trimmed(span: str) -> str:
    """`span` on one line, cut to `EVIDENCE_SPAN_CHARS` at a word boundary with "…"."""
    span = " ".join(span.split())
    if len(span) <= EVIDENCE_SPAN_CHARS:
        return span
    cut = span[: EVIDENCE_SPAN_CHARS - 1]
    space = cut.rfind(" ")
    if space > EVIDENCE_SPAN_CHARS // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _listed(words: Sequence[str]) -> str:
    return ", ".join(f"'{w}'" for w in words)

"""Rules and the linear-time engine that runs them.

Every rule is compiled with RE2 (the `google-re2` binding): it never
backtracks, so a search takes time linear in the length of the text whatever
the pattern and the input. RE2 has no look-around or back-references; the
rules are written without them.

A rule names the view it reads (see `normalise`). Non-ASCII characters in a
pattern are passed through the same normalisation as that view when the rule
is compiled, so a pattern written with "й" or "ジ" matches its view, which
has lost the combining marks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

import re2

from memory_core.safety.normalise import Views, fold_literal

View = Literal["text", "plain", "latin", "compact"]

# Larger than RE2's default 8 MiB, so the DFA's state cache rarely fills on a
# hostile input (it then falls back to a slower, still linear, simulation).
_MAX_MEM = 64 << 20


@dataclass(frozen=True)
class Rule:
    """One pattern: its id, category, the view it reads, and the RE2 source."""

    pattern_id: str
    category: str
    view: View
    pattern: str
    case_sensitive: bool = False


def rules_on(view: View) -> Callable[[str, str, str], Rule]:
    """A maker of rules that read `view`: ``latin = rules_on("latin")``, then
    ``latin(pattern_id, category, pattern)``."""

    def rule(pattern_id: str, category: str, pattern: str) -> Rule:
        return Rule(pattern_id, category, view, pattern)

    return rule


@dataclass(frozen=True)
class Match:
    """A rule that matched, and the matching text of its view."""

    rule: Rule
    text: str


def _options(case_sensitive: bool) -> re2.Options:
    options = re2.Options()
    options.max_mem = _MAX_MEM
    options.log_errors = False
    options.case_sensitive = case_sensitive
    return options


def _fold_pattern(pattern: str, view: View) -> str:
    if pattern.isascii():
        return pattern
    return "".join(ch if ch.isascii() else fold_literal(ch, view) for ch in pattern)


@functools.cache
def compiled(rule: Rule) -> re2._Regexp[str]:
    """The compiled form of `rule`, compiled once on first use (never at import time)."""
    return re2.compile(_fold_pattern(rule.pattern, rule.view), _options(rule.case_sensitive))


def compiles(pattern: str) -> bool:
    """Whether RE2 accepts `pattern` (it refuses look-around and back-references)."""
    try:
        re2.compile(pattern, _options(True))
    except re2.error:
        return False
    return True


def run(rules: Iterable[Rule], forms: Views) -> Iterator[Match]:
    """Each rule of `rules` that matches its view of `forms`, in order."""
    for rule in rules:
        found = compiled(rule).search(getattr(forms, rule.view))
        if found is not None:
            yield Match(rule, found.group(0))

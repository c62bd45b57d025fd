"""The scan itself: every rule over every view, rot13 and base64, the length cap.

See the package docstring for what is read and how.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

import memory_core.safety.decode as decode
from memory_core.errors import UnsafeContentError
from memory_core.safety.engine import Match, Rule, run
from memory_core.safety.finding import OVERSIZED, Finding, excerpt
from memory_core.safety.languages import RULES as LANGUAGE_RULES
from memory_core.safety.languages_wide import RULES as WIDE_LANGUAGE_RULES
from memory_core.safety.normalise import Views, invisible_finding, views
from memory_core.safety.rules import COMPACT, EXFIL, HOST, INJECTION, MARKUP, ROLE
from memory_core.safety.rules_wide import WIDE
from memory_core.safety.secrets import OWN as OWN_SECRET_RULES
from memory_core.safety.secrets import detect_secrets_rules, secret_matches

MAX_SCAN_CHARS = 262_144
_MAX_DEPTH = 2  # base64 inside base64 is decoded once more, no further

# Rules in the order scan() reports them; secrets are checked after these.
_TEXT_RULES: tuple[Rule, ...] = (
    *INJECTION,
    *ROLE,
    *MARKUP,
    *LANGUAGE_RULES,
    *COMPACT,
    *EXFIL,
    *HOST,
    *WIDE,
    *WIDE_LANGUAGE_RULES,
)


def all_rules() -> tuple[Rule, ...]:
    """Every pattern the scan runs, secrets included (for tests and benchmarks)."""
    return (*_TEXT_RULES, *_secret_rules())


def _secret_rules() -> tuple[Rule, ...]:
    return (*OWN_SECRET_RULES, *detect_secrets_rules())


@functools.cache
def _rot13_rules() -> tuple[Rule, ...]:
    return tuple(rule for rule in _TEXT_RULES if rule.view in ("latin", "compact"))


def _finding(match: Match, label: str = "") -> Finding:
    return Finding(match.rule.pattern_id, match.rule.category, excerpt(label + match.text))


def _rot13_views(forms: Views) -> Views:
    latin = decode.rot13(forms.latin)
    return Views(latin, latin, latin, decode.rot13(forms.compact))


def _findings(text: str, depth: int = 0, label: str = "") -> Iterator[Finding]:
    if len(text) > MAX_SCAN_CHARS:
        yield Finding("too_long_to_scan", OVERSIZED, f"{len(text):,} characters")
        return
    invisible = invisible_finding(text)
    if invisible is not None:
        yield invisible
    forms = views(text)
    for match in run(_TEXT_RULES, forms):
        yield _finding(match, label)
    for match in secret_matches(forms):
        yield _finding(match, label)
    for match in run(_rot13_rules(), _rot13_views(forms)):
        yield _finding(match, label + "[rot13] ")
    for unleeted in decode.unleet(forms.latin):
        for match in run(_rot13_rules(), views(unleeted)):
            yield _finding(match, label + "[leet] ")
    if depth < _MAX_DEPTH:
        for hidden in decode.base64_texts(forms.text):
            yield from _findings(hidden, depth + 1, label + "[base64] ")


def _unique(findings: Iterator[Finding]) -> Iterator[Finding]:
    seen: set[str] = set()
    for finding in findings:
        if finding.pattern_id not in seen:
            seen.add(finding.pattern_id)
            yield finding


def scan_all(text: str) -> list[Finding]:
    """Every finding in `text`, one per pattern id: invisible Unicode first, then the rules."""
    return list(_unique(_findings(text)))


def scan(text: str) -> Finding | None:
    """The first finding in `text`, or None when it is clean."""
    return next(_findings(text), None)


def scan_joined(parts: Sequence[str]) -> list[Finding]:
    """What `parts` say only when read together, as the model reads adjacent entries.

    The parts are joined by a newline and scanned; a finding whose pattern
    already matches one of the parts on its own is left out (that part is
    judged by itself), so only what the join creates is reported.
    """
    if len(parts) < 2:
        return []
    alone = {f.pattern_id for part in parts for f in scan_all(part)}
    return [f for f in scan_all("\n".join(parts)) if f.pattern_id not in alone]


def check(text: str) -> None:
    """Raise `UnsafeContentError` for the first finding in `text`."""
    finding = scan(text)
    if finding is not None:
        raise UnsafeContentError(finding)

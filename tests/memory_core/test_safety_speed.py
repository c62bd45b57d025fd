"""The scan runs in linear time: every pattern on 100,000 characters of hostile filler.

The issue asks for this timed test explicitly. Each pattern gets the best of
three runs, so that a busy two-core machine does not make it flaky.
"""

from __future__ import annotations

import time

import pytest

from memory_core.safety import all_rules, scan
from memory_core.safety.engine import compiled
from memory_core.safety.normalise import views

SIZE = 100_000
BUDGET_SECONDS = 0.050

FILLERS: dict[str, str] = {
    "apostrophes": "'" * SIZE,
    "curly_apostrophes": "’" * SIZE,
    "dashes": "-" * SIZE,
    "underscores": "_" * SIZE,
    "spaces": " " * SIZE,
    "letters": "a" * SIZE,
    "words": ("ignore all " * SIZE)[:SIZE],
    "ignore_apostrophes": ("ignore " + "'" * SIZE)[:SIZE],
    "ignore_curly": ("ignore " + "’" * SIZE)[:SIZE],
    "mixed": ("ignore '’-_ a " * SIZE)[:SIZE],
    "dots": ("a." * SIZE)[:SIZE],
    "base64ish": ("QUJD" * SIZE)[:SIZE],
    "lt": "<" * SIZE,
    "digits_colon": ("12345678:" * SIZE)[:SIZE],
}


def _best_of_three(action: object) -> float:
    assert callable(action)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("name", sorted(FILLERS))
def test_every_pattern_scans_100k_of_filler_in_under_50ms(name: str) -> None:
    forms = views(FILLERS[name])
    slow: list[str] = []
    for rule in all_rules():
        regex = compiled(rule)
        text = getattr(forms, rule.view)
        seconds = _best_of_three(lambda r=regex, t=text: r.search(t))
        if seconds >= BUDGET_SECONDS:
            slow.append(f"{rule.pattern_id}: {seconds * 1000:.1f} ms")
    assert not slow, slow


@pytest.mark.parametrize(
    "text",
    [
        "ignore " + "'" * 30,
        "Skip breakfast on ____________________________ (fill in later)",
        "Drop-off: ------------------------",
    ],
)
def test_the_issue_examples_are_fast_and_clean(text: str) -> None:
    assert _best_of_three(lambda: scan(text)) < BUDGET_SECONDS
    assert scan(text) is None

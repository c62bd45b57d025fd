"""The case table (tests/data/grounding_cases.jsonl), written before the check changed:
what a careful person expects to be written about them, and what refused, with why.

Each case gives the check what the gateway would (`said_texts`): the person's own
messages, without the assistant's and without forwarded ones. A refused case names its
reason, and the verdict must be that reason. Two cases are known misses of the word
lists (see `memory_core.grounding.polarity`): they are marked, and fail loudly if the
check ever gets them right.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memory_core.grounding import OwnWords, check

CASES = Path(__file__).resolve().parents[2] / "data" / "grounding_cases.jsonl"
ROWS: list[dict[str, Any]] = [
    json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines() if line
]
KNOWN_MISSES = {
    "en-sarcasm-queue": "sarcasm: 'I just LOVE waiting in line' reads as a statement",
    "en-told-mum-glasgow": "reported speech: 'told my mum' is taken for a third party subject",
}


def own_words(row: dict[str, Any]) -> OwnWords:
    return OwnWords(
        m["text"] for m in row["messages"] if m["role"] == "user" and not m.get("forwarded")
    )


def params() -> list[Any]:
    return [
        pytest.param(row, id=row["id"], marks=pytest.mark.xfail(reason=why, strict=True))
        if (why := KNOWN_MISSES.get(row["id"]))
        else pytest.param(row, id=row["id"])
        for row in ROWS
    ]


@pytest.mark.parametrize("row", params())
def test_the_case_gets_what_it_expects(row: dict[str, Any]) -> None:
    support = check(row["entry"], own_words(row))
    if row["expect"] == "write":
        assert support.supported, support.reason()
        assert support.evidence, "a written entry keeps its evidence"
    else:
        assert not support.supported, support.evidence
        assert support.verdict == row["reason"], support.reason()


def test_the_table_is_what_the_issue_asks_for() -> None:
    ids = [row["id"] for row in ROWS]
    assert len(ids) == len(set(ids))
    refuse = [row for row in ROWS if row["expect"] == "refuse"]
    write = [row for row in ROWS if row["expect"] == "write"]
    assert len(refuse) >= 24 and len(write) >= 24
    assert {row["lang"] for row in ROWS} >= {"en", "es", "zh", "fr", "de"}
    assert all(row["reason"] in {"asked", "opposite", "not_said", "someone_else"} for row in refuse)
    assert all(row["reason"] is None for row in write)
    issue = {"en-guess-city", "en-sister-penicillin", "en-brother-surgeon", "en-diabetes-no-way"}
    issue |= {"en-not-zanzibar", "en-planted-tail", "en-forwarded-atlantis"}
    assert issue <= {row["id"] for row in refuse}

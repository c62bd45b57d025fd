"""Stale facts: a new value for a one-value fact of the person's replaces the old entry,
and nothing else does (a wrong match would lose a true fact)."""

from __future__ import annotations

import pytest

from memory_core import superseded


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("Moved to Porto", "Lives in Lisbon"),
        ("User moved to Porto.", "User lives in Lisbon."),
        ("User is 35 years old", "User is 34 years old"),
        ("Takes 25 mg of sertraline", "Takes 20 mg of sertraline"),
        ("User works at Microsoft", "User works at Google"),
        ("Vive en Oporto", "Vivo en Lisboa"),
        ("搬到波尔图", "用户住在里斯本"),
    ],
)
def test_a_new_value_replaces_the_old_one(new: str, old: str) -> None:
    assert superseded(new, ["Has a dog called Biscuit", old]) == old


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("User lives with a cat.", "User lives in Lisbon."),
        ("User lives alone.", "User lives in Lisbon."),
        ("User works at Google.", "User works as a nurse."),
        ("User works from home.", "User works as a nurse."),
        ("User works with Python", "User works at Google"),
        ("Speaks German", "Speaks French"),
        ("Likes tea", "Likes coffee"),
        ("Has a dog called Max", "Has a dog called Biscuit"),
        ("我的猫叫Tom", "我的狗叫Biscuit"),
    ],
)
def test_another_fact_is_not_taken_for_a_new_value(new: str, old: str) -> None:
    assert superseded(new, [old]) is None


def test_two_candidates_are_none() -> None:
    assert superseded("Moved to Porto", ["Lives in Lisbon", "Lives in Madrid"]) is None

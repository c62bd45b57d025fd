"""A message's UTC date as words: the tables, the Python function and its SQL twin."""

from __future__ import annotations

import sqlite3

from hypothesis import example, given, settings
from hypothesis import strategies as st

from memory_core.sessions import date_words as dw
from memory_core.sessions.date_words import MONTHS, WEEKDAYS, date_words, date_words_sql

MONDAY_8_MAY_2023 = 1_683_504_000.0  # 00:00 UTC


def test_every_month_and_weekday_has_its_name_in_three_languages() -> None:
    assert len(MONTHS) == 12 and len(WEEKDAYS) == 7
    assert all(len(names) == 3 and all(names) for names in (*MONTHS, *WEEKDAYS))
    assert MONTHS[4] == ("may", "mayo", "5月") and WEEKDAYS[0] == ("monday", "lunes", "星期一")
    assert [m[2] for m in MONTHS] == [f"{n}月" for n in range(1, 13)]


def test_a_date_is_its_month_weekday_year_and_day() -> None:
    words = date_words(MONDAY_8_MAY_2023 + 23 * 3600)
    assert words.split() == ["may", "mayo", "5", "月", "monday", "lunes", "星期", "期一", "一",
                             "2023", "8"]  # fmt: skip
    assert date_words(MONDAY_8_MAY_2023 - 0.0001).split()[4:] == [
        "sunday", "domingo", "星期", "期日", "日", "2023", "7",
    ]  # fmt: skip
    assert date_words(0).split()[-2:] == ["1970", "1"]


def test_times_outside_the_years_1000_to_9999_have_no_words() -> None:
    assert date_words(dw.FIRST) != "" and date_words(dw.END - 1) != ""
    for when in (dw.FIRST - 0.5, dw.END, float("inf"), float("-inf"), float("nan"), 1e300):
        assert date_words(when) == ""


_SQL: list[sqlite3.Connection] = []


def _in_sql(when: float) -> str:
    if not _SQL:
        _SQL.append(sqlite3.connect(":memory:"))
    value: str = _SQL[0].execute(f"SELECT {date_words_sql('?1')}", (when,)).fetchone()[0]
    return value


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.floats(min_value=-4e10, max_value=3e11, allow_nan=False),
        st.integers(min_value=-400_000, max_value=3_000_000).map(lambda d: d * 86_400.0),
        st.integers(min_value=-400_000, max_value=3_000_000).map(lambda d: d * 86_400 - 0.0004),
    )
)
@example(dw.FIRST)
@example(dw.FIRST - 0.25)
@example(dw.END - 0.5)
@example(-1e-300)
def test_the_sql_twin_gives_the_same_words(when: float) -> None:
    assert _in_sql(when) == date_words(when)

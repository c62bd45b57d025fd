"""Time phrases for /recall, against a fixed `now` (Wednesday 16 April 2025, 15:30 UTC)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.sessions.time_phrases import TimeWindow, parse_time_phrase

NOW = datetime(2025, 4, 16, 15, 30, tzinfo=UTC)


def day(text: str | None) -> float | None:
    return None if text is None else datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "query", "since", "until"),
    [
        ("today", "", "2025-04-16", "2025-04-17"),
        ("yesterday's dinner", "dinner", "2025-04-15", "2025-04-16"),
        ("what did we say about kubernetes last week", "what did we say about kubernetes",
         "2025-04-07", "2025-04-14"),
        ("this week", "", "2025-04-14", "2025-04-21"),
        ("budget this month", "budget", "2025-04-01", "2025-05-01"),
        ("last month", "", "2025-03-01", "2025-04-01"),
        ("this year", "", "2025-01-01", "2026-01-01"),
        ("last year", "", "2024-01-01", "2025-01-01"),
        ("the gym in March", "the gym", "2025-03-01", "2025-04-01"),
        ("in December", "", "2024-12-01", "2025-01-01"),  # the latest December that has begun
        ("trip in May 2023", "trip", "2023-05-01", "2023-06-01"),
        ("during june", "", "2024-06-01", "2024-07-01"),
        ("in 2024", "", "2024-01-01", "2025-01-01"),
        ("pasta 3 days ago", "pasta", "2025-04-13", "2025-04-14"),
        ("two weeks ago", "", "2025-03-31", "2025-04-07"),
        ("a month ago", "", "2025-03-01", "2025-04-01"),
        ("since Monday gym", "gym", "2025-04-14", None),
        ("since wednesday", "", "2025-04-16", None),  # today is a Wednesday
        ("since yesterday", "", "2025-04-15", None),
        ("since last week", "", "2025-04-07", None),
        ("since March", "", "2025-03-01", None),
        ("in the last 3 days", "", "2025-04-13", None),
        ("notes past 2 weeks", "notes", "2025-04-02", None),
        ("on Friday", "", "2025-04-11", "2025-04-12"),
        ("last wednesday", "", "2025-04-09", "2025-04-10"),
        ("on 2025-03-02", "", "2025-03-02", "2025-03-03"),
        ("party on 8 May, 2023", "party", "2023-05-08", "2023-05-09"),
        ("May 8 party", "party", "2024-05-08", "2024-05-09"),
        ("pizza since 2025-03-02", "pizza", "2025-03-02", None),
        ("pizza from 2025-03-02 to 2025-03-04", "pizza", "2025-03-02", "2025-03-05"),
        ("pizza from 2025-03-04 until 2025-03-02", "pizza", "2025-03-02", "2025-03-05"),
        ("pizza until 2025-03-02", "pizza", None, "2025-03-03"),
        ("pizza before 2025-03-02", "pizza", None, "2025-03-02"),
        # kept to what the store holds: 1970 to the end of 9999, never one day of year 1
        ("pizza since 0001-01-01 until 9999-12-31", "pizza", "1970-01-01", None),
        ("pizza on 9999-12-31", "pizza", "9999-12-31", None),
        ("since 1960-01-01 until 1965-01-01", "", "1960-01-01", "1965-01-02"),
    ],
)  # fmt: skip
def test_known_phrases(text: str, query: str, since: str | None, until: str | None) -> None:
    assert parse_time_phrase(text, NOW) == TimeWindow(query, day(since), day(until))


@pytest.mark.parametrize("text", ["hello there", "what may I do", "on 31 February", "march on"])
def test_unknown_phrases_leave_the_window_open(text: str) -> None:
    window = parse_time_phrase(text, NOW)
    assert (window.since, window.until) == (None, None)
    assert window.query == text


def test_calendar_days_follow_the_time_zone_of_now() -> None:
    shanghai = timezone(timedelta(hours=8))
    window = parse_time_phrase("today", datetime(2025, 4, 16, 1, 0, tzinfo=shanghai))
    assert window.since == datetime(2025, 4, 16, tzinfo=shanghai).timestamp()
    assert window.until == datetime(2025, 4, 17, tzinfo=shanghai).timestamp()


def test_a_naive_now_is_utc() -> None:
    assert parse_time_phrase("today", NOW.replace(tzinfo=None)) == parse_time_phrase("today", NOW)


def test_the_first_phrase_wins_and_only_it_is_removed() -> None:
    window = parse_time_phrase("yesterday I said today", NOW)
    assert window == TimeWindow("I said today", day("2025-04-15"), day("2025-04-16"))


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=80))
def test_any_text_gives_a_well_formed_window(text: str) -> None:
    window = parse_time_phrase(text, NOW)
    if window.since is not None and window.until is not None:
        assert window.since < window.until
    if window.since is None and window.until is None:
        assert window.query == text.strip()


@pytest.mark.parametrize(
    ("text", "query", "since", "until"),
    [
        ("上周的健身", "健身", "2025-04-07", "2025-04-14"),
        ("昨天 晚饭", "晚饭", "2025-04-15", "2025-04-16"),
        ("三月 旅行", "旅行", "2025-03-01", "2025-04-01"),
        ("我们上周说的kubernetes", "我们 说的kubernetes", "2025-04-07", "2025-04-14"),
        ("3天前", "", "2025-04-13", "2025-04-14"),
        ("去年", "", "2024-01-01", "2025-01-01"),
    ],
)  # fmt: skip
def test_chinese_phrases(text: str, query: str, since: str, until: str) -> None:
    assert parse_time_phrase(text, NOW) == TimeWindow(query, day(since), day(until))


def test_chinese_text_without_a_time_phrase_leaves_the_window_open() -> None:
    assert parse_time_phrase("健身计划", NOW) == TimeWindow("健身计划", None, None)

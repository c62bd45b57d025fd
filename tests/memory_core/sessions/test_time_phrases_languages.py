"""Time phrases in Chinese and Spanish as a native speaker types them in `/recall`, and
windows in a zone with daylight saving time.

`now` is Wednesday 16 April 2025, 15:30 UTC. The table was written before the rules.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.sessions.time_phrases import TimeWindow, parse_time_phrase

NOW = datetime(2025, 4, 16, 15, 30, tzinfo=UTC)
ZH = ("zh", "en")
ES = ("es", "en", "zh")


def day(text: str | None) -> float | None:
    return None if text is None else datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "query", "since", "until"),
    [
        ("昨天", "", "2025-04-15", "2025-04-16"),
        ("今天", "", "2025-04-16", "2025-04-17"),
        ("前天", "", "2025-04-14", "2025-04-15"),
        ("上周", "", "2025-04-07", "2025-04-14"),
        ("上星期的会议", "会议", "2025-04-07", "2025-04-14"),
        ("上个星期", "", "2025-04-07", "2025-04-14"),
        ("这周", "", "2025-04-14", "2025-04-21"),
        ("本周", "", "2025-04-14", "2025-04-21"),
        ("三天前", "", "2025-04-13", "2025-04-14"),
        ("3天前", "", "2025-04-13", "2025-04-14"),
        ("两周前", "", "2025-03-31", "2025-04-07"),
        ("两个月前", "", "2025-02-01", "2025-03-01"),
        ("一年前", "", "2024-01-01", "2025-01-01"),
        ("上个月", "", "2025-03-01", "2025-04-01"),
        ("上个月的旅行计划", "旅行计划", "2025-03-01", "2025-04-01"),
        ("这个月", "", "2025-04-01", "2025-05-01"),
        ("今年", "", "2025-01-01", "2026-01-01"),
        ("去年", "", "2024-01-01", "2025-01-01"),
        ("前年", "", "2023-01-01", "2024-01-01"),
        ("2024年3月", "", "2024-03-01", "2024-04-01"),
        ("2024年3月的账单", "账单", "2024-03-01", "2024-04-01"),
        ("十二月", "", "2024-12-01", "2025-01-01"),  # the latest December that has begun
        ("3月15日", "", "2025-03-15", "2025-03-16"),
        ("2024年3月15号", "", "2024-03-15", "2024-03-16"),
        ("2024年", "", "2024-01-01", "2025-01-01"),
        ("自从周一", "", "2025-04-14", None),
        ("从周一开始", "", "2025-04-14", None),
        ("周一以来的健身", "健身", "2025-04-14", None),
        ("从昨天开始", "", "2025-04-15", None),
        ("从上周开始", "", "2025-04-07", None),
        ("上周三", "", "2025-04-09", "2025-04-10"),
        ("周五", "", "2025-04-11", "2025-04-12"),
        ("星期五 聚餐", "聚餐", "2025-04-11", "2025-04-12"),
        ("最近三天", "", "2025-04-13", None),
        ("过去两周", "", "2025-04-02", None),
        ("健身 上周", "健身", "2025-04-07", "2025-04-14"),
    ],
)  # fmt: skip
def test_chinese(text: str, query: str, since: str | None, until: str | None) -> None:
    assert parse_time_phrase(text, NOW, languages=ZH) == TimeWindow(query, day(since), day(until))


@pytest.mark.parametrize(
    ("text", "query", "since", "until"),
    [
        ("ayer", "", "2025-04-15", "2025-04-16"),
        ("hoy", "", "2025-04-16", "2025-04-17"),
        ("anteayer", "", "2025-04-14", "2025-04-15"),
        ("la cena de ayer", "la cena", "2025-04-15", "2025-04-16"),
        ("la semana pasada", "", "2025-04-07", "2025-04-14"),
        ("el dentista la semana pasada", "el dentista", "2025-04-07", "2025-04-14"),
        ("qué dijimos de kubernetes la semana pasada", "qué dijimos de kubernetes",
         "2025-04-07", "2025-04-14"),
        ("Semana pasada", "", "2025-04-07", "2025-04-14"),
        ("esta semana", "", "2025-04-14", "2025-04-21"),
        ("el mes pasado", "", "2025-03-01", "2025-04-01"),
        ("este mes", "", "2025-04-01", "2025-05-01"),
        ("el año pasado", "", "2024-01-01", "2025-01-01"),
        ("este año", "", "2025-01-01", "2026-01-01"),
        ("hace 3 días", "", "2025-04-13", "2025-04-14"),
        ("hace tres dias", "", "2025-04-13", "2025-04-14"),
        ("hace dos semanas", "", "2025-03-31", "2025-04-07"),
        ("hace un mes", "", "2025-03-01", "2025-04-01"),
        ("desde el lunes", "", "2025-04-14", None),
        ("el gimnasio desde el lunes", "el gimnasio", "2025-04-14", None),
        ("desde ayer", "", "2025-04-15", None),
        ("desde la semana pasada", "", "2025-04-07", None),
        ("desde marzo", "", "2025-03-01", None),
        ("en marzo", "", "2025-03-01", "2025-04-01"),
        ("el viaje en marzo de 2023", "el viaje", "2023-03-01", "2023-04-01"),
        ("el viaje de marzo", "el viaje", "2025-03-01", "2025-04-01"),
        ("en diciembre", "", "2024-12-01", "2025-01-01"),
        ("en 2024", "", "2024-01-01", "2025-01-01"),
        ("el viernes", "", "2025-04-11", "2025-04-12"),
        ("el miércoles pasado", "", "2025-04-09", "2025-04-10"),
        ("el miercoles pasado", "", "2025-04-09", "2025-04-10"),
        ("los últimos 3 días", "", "2025-04-13", None),
        ("en las últimas dos semanas", "", "2025-04-02", None),
        ("el 8 de mayo de 2023", "", "2023-05-08", "2023-05-09"),
        ("el 3 de marzo 2024", "", "2024-03-03", "2024-03-04"),
        ("la fiesta del 8 de mayo", "la fiesta", "2024-05-08", "2024-05-09"),
    ],
)  # fmt: skip
def test_spanish(text: str, query: str, since: str | None, until: str | None) -> None:
    assert parse_time_phrase(text, NOW, languages=ES) == TimeWindow(query, day(since), day(until))


@pytest.mark.parametrize(
    "text", ["hablamos del dentista", "el gato de Ana", "mar y playa", "la receta de paella"]
)
def test_spanish_without_a_time_phrase_leaves_the_window_open(text: str) -> None:
    assert parse_time_phrase(text, NOW, languages=ES) == TimeWindow(text, None, None)


def test_spanish_phrases_are_read_only_for_a_spanish_speaker() -> None:
    """For an English speaker "ayer" is a word to search for, not yesterday."""
    assert parse_time_phrase("ayer", NOW, languages=("en", "zh")) == TimeWindow("ayer", None, None)


def test_english_phrases_still_work_for_a_spanish_speaker() -> None:
    window = parse_time_phrase("kubernetes last week", NOW, languages=ES)
    assert window == TimeWindow("kubernetes", day("2025-04-07"), day("2025-04-14"))


@pytest.mark.parametrize(
    ("now", "since", "until", "hours"),
    [
        # New York springs forward on 9 March 2025: that Sunday has 23 hours
        ("2025-03-10T12:00", "2025-03-09T00:00-05:00", "2025-03-10T00:00-04:00", 23),
        # and falls back on 2 November 2025: that Sunday has 25 hours
        ("2025-11-03T12:00", "2025-11-02T00:00-04:00", "2025-11-03T00:00-05:00", 25),
    ],
)
def test_yesterday_across_a_daylight_saving_change_is_that_local_day(
    now: str, since: str, until: str, hours: int
) -> None:
    zone = ZoneInfo("America/New_York")
    window = parse_time_phrase("yesterday", datetime.fromisoformat(now).replace(tzinfo=zone))
    assert window.since == datetime.fromisoformat(since).timestamp()
    assert window.until == datetime.fromisoformat(until).timestamp()
    assert window.since is not None and window.until is not None
    assert window.until - window.since == hours * 3600


def test_chinese_yesterday_in_shanghai_on_both_sides_of_utc_midnight() -> None:
    shanghai = ZoneInfo("Asia/Shanghai")
    morning = datetime(2026, 12, 1, 23, 30, tzinfo=UTC).astimezone(shanghai)  # local 12-02 07:30
    window = parse_time_phrase("昨天", morning, languages=ZH)
    assert window.since == datetime(2026, 11, 30, 16, tzinfo=UTC).timestamp()
    assert window.until == datetime(2026, 12, 1, 16, tzinfo=UTC).timestamp()
    night = datetime(2026, 12, 1, 15, 30, tzinfo=UTC).astimezone(shanghai)  # local 12-01 23:30
    window = parse_time_phrase("昨天", night, languages=ZH)
    assert window.since == datetime(2026, 11, 29, 16, tzinfo=UTC).timestamp()
    assert window.until == datetime(2026, 11, 30, 16, tzinfo=UTC).timestamp()


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="ayerhcdsmnoáíú 0123456789昨天上周三月前自从", max_size=40))
def test_any_text_gives_a_well_formed_window_in_every_language(text: str) -> None:
    window = parse_time_phrase(text, NOW, languages=ES)
    if window.since is not None and window.until is not None:
        assert window.since < window.until
    if window.since is None and window.until is None:
        assert window.query == text.strip()

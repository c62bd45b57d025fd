"""Phrases of time in `/recall` text ("last week", "in March") as a search window.

`parse_time_phrase(text, now)` finds the first phrase it knows, turns it
into a window of epoch seconds (`since` inclusive, `until` exclusive, either
open) and returns the rest of the text as the query. Calendar units follow
`now`'s time zone (naive means UTC); weeks start on Monday. Unknown phrases
leave the window open and the text unchanged. It is a pure function.

Understood (case-insensitive):
- today, yesterday; this/last week, month, year
- in/during <month> [<year>] (without a year: the latest such month that
  has begun), in <year>
- N days/weeks/months/years ago (N in digits or words, "a"/"an"): that
  calendar day, week, month or year
- last/past N days/weeks/months, in the last N …: from then until now
- since <weekday> | yesterday | last week | last month | <month> [<year>]
- on/last <weekday>: that day (the latest one before today)
- on <YYYY-MM-DD>, on <d> <month> [<year>], on <month> <d>[,] [<year>]
- since/from <YYYY-MM-DD> [until/till/to/through <YYYY-MM-DD>], until/till/
  through <YYYY-MM-DD> (that day included), before <YYYY-MM-DD> (excluded);
  a range given backwards is read forwards

Windows are kept to what the store can hold (moments from 1970 to the end of
9999, as `jsonl.parse_timestamp` accepts): a start before 1970 reads as 1970,
an end past 9999 as open.

Text in Chinese (上周, 昨天, 三月, 3天前, 去年, 2024年3月 …) that the table
does not cover goes to the `dateparser` package, imported on first use (it
takes a fraction of a second to load): the phrase it finds names a day,
week, month or year, and the window is that calendar unit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

MONTHS = [
    "january", "february", "march", "april", "may", "june", "july",
    "august", "september", "october", "november", "december",
]  # fmt: skip
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip

_MONTH = r"(?P<month>" + "|".join(m[:3] + f"(?:{m[3:]})?" for m in MONTHS) + r")\.?"
_DAY = r"(?P<weekday>" + "|".join(WEEKDAYS) + r")"
_N = r"(?P<n>\d{1,3}|" + "|".join(NUMBERS) + r")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_ISO = r"\d{4}-\d\d-\d\d"
FIRST_DAY = date(1970, 1, 1)  # the store holds nothing earlier


@dataclass(frozen=True)
class TimeWindow:
    """The query without its time phrase, and the window it named (None = open)."""

    query: str
    since: float | None
    until: float | None


@dataclass(frozen=True)
class _Ctx:
    today: date
    now: datetime
    tz: tzinfo


Span = tuple[date | None, date | None]  # [start day, end day) of the window
Days = tuple[date, date]  # a window closed at both ends


def _month_number(name: str) -> int:
    return next(i for i, m in enumerate(MONTHS, start=1) if m.startswith(name.lower()[:3]))


def _month_start(year: int, month: int) -> date:
    return date(year + (month - 1) // 12, (month - 1) % 12 + 1, 1)


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _shift_months(day: date, months: int) -> date:
    return _month_start(day.year, day.month + months)


def _count(text: str) -> int:
    return int(text) if text.isdigit() else NUMBERS[text.lower()]


def _unit_window(start: date, unit: str) -> Days:
    if unit == "day":
        return start, start + timedelta(days=1)
    if unit == "week":
        return _week_start(start), _week_start(start) + timedelta(days=7)
    if unit == "month":
        return _month_start(start.year, start.month), _shift_months(start, 1)
    return date(start.year, 1, 1), date(start.year + 1, 1, 1)


def _back(today: date, n: int, unit: str) -> date:
    if unit == "day":
        return today - timedelta(days=n)
    if unit == "week":
        return today - timedelta(weeks=n)
    if unit == "month":
        return _shift_months(today, -n) + timedelta(days=min(today.day, 28) - 1)
    return date(today.year - n, today.month, min(today.day, 28))


def _named_month(m: re.Match[str], c: _Ctx) -> date:
    month = _month_number(m["month"])
    if m["year"]:
        return date(int(m["year"]), month, 1)
    year = c.today.year if month <= c.today.month else c.today.year - 1
    return date(year, month, 1)


def _last_weekday(m: re.Match[str], c: _Ctx, include_today: bool) -> date:
    back = (c.today.weekday() - WEEKDAYS.index(m["weekday"].lower())) % 7
    if back == 0 and not include_today:
        back = 7
    return c.today - timedelta(days=back)


def _calendar_window(which: str, unit: str, today: date) -> Days:
    """This or last calendar week, month or year."""
    start = _unit_window(today, unit)[0]
    if which == "last":
        start = _unit_window(_back(start, 1, unit), unit)[0]
    return _unit_window(start, unit)


def _calendar(m: re.Match[str], c: _Ctx) -> Span:
    return _calendar_window(m["which"].lower(), m["unit"].lower(), c.today)


def _since(m: re.Match[str], c: _Ctx) -> Span:
    if m["weekday"]:
        return _last_weekday(m, c, include_today=True), None
    if m["month"]:
        return _named_month(m, c), None
    what = m["what"].lower()
    if what == "yesterday":
        return c.today - timedelta(days=1), None
    return _calendar_window("last", what.split()[-1], c.today)[0], None


def _ago(n: str, unit: str, today: date) -> Span:
    return _unit_window(_back(today, _count(n), unit), unit)


def _one_day(day: date) -> Span:
    return day, _day_after(day)


def _day_after(day: date) -> date | None:
    """The next day; None (open) after the last day a date can hold, 9999-12-31."""
    return None if day == date.max else day + timedelta(days=1)


def _iso_range(m: re.Match[str], c: _Ctx) -> Span:
    start = date.fromisoformat(m["start"]) if m["start"] else None
    end = date.fromisoformat(m["end"]) if m["end"] else None
    if start is not None and end is not None and end < start:  # given backwards
        start, end = end, start
    if end is not None and m["before"]:
        return start, end  # before a day: that day excluded
    return start, _day_after(end) if end is not None else None


def _on_date(m: re.Match[str], c: _Ctx) -> Span:
    if m.groupdict().get("iso"):
        day = date.fromisoformat(m["iso"])
    else:
        month = _month_number(m["month"])
        year = int(m["year"]) if m["year"] else c.today.year
        day = date(year, month, int(m["day"]))
        if not m["year"] and day > c.today:
            day = date(year - 1, month, int(m["day"]))
    return _one_day(day)


_PATTERNS: list[tuple[str, Callable[[re.Match[str], _Ctx], Span]]] = [
    (r"(?:since|from)\s+(?P<start>" + _ISO + r")(?:\s+(?:until|till|to|through)\s+(?P<end>"
     + _ISO + r"))?(?P<before>)", _iso_range),
    (r"(?:(?P<before>before)|until|till|through)\s+(?P<end>" + _ISO + r")(?P<start>)",
     _iso_range),
    (r"(?:on\s+)?(?:(?P<iso>\d{4}-\d\d-\d\d)|(?P<day>\d{1,2})(?:st|nd|rd|th)?\s+" + _MONTH
     + r",?(?:\s+" + _YEAR + r")?)", _on_date),
    (r"(?:on\s+)?" + _MONTH
     + r"\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?(?:\s+" + _YEAR + r")?", _on_date),
    (r"today", lambda m, c: (c.today, c.today + timedelta(days=1))),
    (r"yesterday", lambda m, c: (c.today - timedelta(days=1), c.today)),
    (r"(?:in\s+the\s+)?(?:last|past)\s+" + _N + r"\s+" + _UNIT,
     lambda m, c: (_back(c.today, _count(m["n"]), m["unit"].lower()), None)),
    (_N + r"\s+" + _UNIT + r"\s+ago", lambda m, c: _ago(m["n"], m["unit"].lower(), c.today)),
    (r"(?P<which>this|last)\s+(?P<unit>week|month|year)", _calendar),
    (r"since\s+(?:" + _DAY + "|" + _MONTH + r"(?:\s+" + _YEAR + r")?"
     + r"|(?P<what>yesterday|last\s+week|last\s+month|last\s+year))", _since),
    (r"(?:on|last)\s+" + _DAY, lambda m, c: _one_day(_last_weekday(m, c, False))),
    (r"(?:in|during)\s+" + _MONTH + r"(?:\s+" + _YEAR + r")?",
     lambda m, c: _unit_window(_named_month(m, c), "month")),
    (r"in\s+" + _YEAR, lambda m, c: _unit_window(date(int(m["year"]), 1, 1), "year")),
]  # fmt: skip
_COMPILED = [(re.compile(rf"\b{p}\b", re.IGNORECASE), f) for p, f in _PATTERNS]
_CJK = re.compile(r"[\u3400-\u9fff]")
_PERIODS = {"day", "week", "month", "year"}


def parse_time_phrase(text: str, now: datetime) -> TimeWindow:
    """Split `text` into a query and the time window its first known phrase names."""
    tz = now.tzinfo or UTC
    local = now.astimezone(tz) if now.tzinfo else now.replace(tzinfo=UTC)
    ctx = _Ctx(today=local.date(), now=local, tz=tz)
    best: tuple[int, re.Match[str], Callable[[re.Match[str], _Ctx], Span]] | None = None
    for pattern, handler in _COMPILED:
        found = pattern.search(text)
        if found and (best is None or found.start() < best[0]):
            best = (found.start(), found, handler)
    if best is None:
        return _cjk_phrase(text, ctx) if _CJK.search(text) else TimeWindow(text.strip(), None, None)
    _, found, handler = best
    try:
        start, end = handler(found, ctx)
    except ValueError:  # a date that does not exist, such as 31 February
        return TimeWindow(text.strip(), None, None)
    rest = text[: found.start()] + " " + re.sub(r"^['’]s\b", "", text[found.end() :])
    rest = re.sub(r"\s+", " ", rest).strip(" ,.;:-")
    rest = re.sub(r"\s+(?:from|in|on|during|of|about)$", "", rest, flags=re.IGNORECASE)
    if start is not None and start < FIRST_DAY and (end is None or end > FIRST_DAY):
        start = FIRST_DAY  # what the store can hold; a window wholly before it stays
    return TimeWindow(rest, _epoch(start, tz), _epoch(end, tz))


def _cjk_phrase(text: str, c: _Ctx) -> TimeWindow:
    """A Chinese time phrase, read by `dateparser` (loaded here, on first use)."""
    from dateparser.date import DateDataParser  # slow to import: only when needed
    from dateparser.search import search_dates

    settings: Any = {"RELATIVE_BASE": c.now.replace(tzinfo=None), "PREFER_DATES_FROM": "past"}
    unchanged = TimeWindow(text.strip(), None, None)
    try:
        found = search_dates(text, languages=["zh"], settings=settings)
        if not found:
            return unchanged
        phrase = found[0][0]
        data = DateDataParser(
            languages=["zh"], settings={**settings, "RETURN_TIME_AS_PERIOD": True}
        ).get_date_data(phrase)
    except (ValueError, OverflowError):  # a date that does not exist
        return unchanged
    if data.date_obj is None or data.period not in _PERIODS or not phrase.strip():
        return unchanged
    start, end = _unit_window(data.date_obj.date(), data.period)
    at = text.find(phrase)
    rest = text[:at] + " " + re.sub(r"^的", "", text[at + len(phrase) :])
    rest = re.sub(r"\s+", " ", rest).strip(" ,.;:-，。、")
    return TimeWindow(rest, _epoch(start, c.tz), _epoch(end, c.tz))


def _epoch(day: date | None, tz: tzinfo) -> float | None:
    if day is None:
        return None
    return datetime(day.year, day.month, day.day, tzinfo=tz).timestamp()

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

`languages` says whose phrases are read (the person's language first; by
default English and Chinese): each of English, Chinese and Spanish has its
table, and the earliest phrase in the text wins.
- Chinese: 今天 昨天 前天; 上周 这周 本周 上个星期 上个月 这个月 今年 去年 前年;
  三天前 两周前 两个月前; 最近三天 过去两周; 周五 星期五 上周三; 2024年, 2024年3月,
  三月, 3月15日, 2024年3月15号; 自从周一, 从周一开始, 周一以来, 从上周开始 (since).
- Spanish: hoy, ayer, anteayer; esta semana / la semana pasada, el mes pasado,
  el año pasado …; hace 3 días; los últimos 3 días; el viernes (pasado);
  en marzo (de 2023), de marzo, en 2024; el 8 de mayo (de 2023); desde el lunes
  | ayer | la semana pasada | marzo.

What the tables miss goes to the `dateparser` package, imported on first use
(it takes a fraction of a second to load), in the person's languages but
English, and in Chinese for text holding Chinese: the phrase it finds names a
day, week, month or year, and the window is that calendar unit. Outside
Chinese a phrase without a digit is not taken from it ("mar y playa" is the
sea, not March).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
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
    return _latest_month(_month_number(m["month"]), m["year"], c)


def _latest_month(month: int, year: str | None, c: _Ctx) -> date:
    """That month of `year`; without a year, the latest such month that has begun."""
    if year:
        return date(int(year), month, 1)
    return date(c.today.year if month <= c.today.month else c.today.year - 1, month, 1)


def _last_weekday(m: re.Match[str], c: _Ctx, include_today: bool) -> date:
    return _weekday_back(WEEKDAYS.index(m["weekday"].lower()), c, include_today)


def _weekday_back(weekday: int, c: _Ctx, include_today: bool) -> date:
    """The latest day that is `weekday` (0 Monday), today or (not `include_today`) before."""
    back = (c.today.weekday() - weekday) % 7
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
_CJK = re.compile(r"[\u3400-\u9fff]")
_PERIODS = {"day", "week", "month", "year"}


Rule = tuple[re.Pattern[str], Callable[[re.Match[str], _Ctx], Span]]


@dataclass(frozen=True, eq=False)
class _Table:
    """One language's phrases, and what is dropped around a phrase once it is cut out."""

    rules: list[Rule]
    particle: str  # a word that led into the phrase ("in", "de"), dropped at the end of the rest
    after: str  # what is dropped at the start of the text after the phrase ("'s", 的)


def _dated(year: str | None, month: int, day: int, c: _Ctx) -> Span:
    """One day; without a year, the latest such day up to today."""
    found = date(int(year) if year else c.today.year, month, day)
    if not year and found > c.today:
        found = date(found.year - 1, month, day)
    return _one_day(found)


def _since_start(
    rules: list[Rule], weekday: re.Pattern[str], weekdays: dict[str, int]
) -> Callable[[re.Match[str], _Ctx], Span]:
    """A "since <phrase>" handler: the window from the start of what the phrase names;
    a weekday counts from today when today is that day."""

    def since(m: re.Match[str], c: _Ctx) -> Span:
        what = m["what"]
        named = weekday.fullmatch(what)
        if named is not None:
            return _weekday_back(weekdays[named["wd"].lower()], c, include_today=True), None
        for pattern, handler in rules:
            if (found := pattern.fullmatch(what)) is not None:
                return handler(found, c)[0], None
        raise ValueError(what)  # the pattern only lets phrases of `rules` through

    return since


# Chinese ----------------------------------------------------------------------------
_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9}  # fmt: skip
_ZH_N = r"(?P<n>\d{1,3}|[零一二两三四五六七八九十]{1,3})"
_ZH_UNIT = r"(?:个)?(?P<unit>天|日|周|星期|礼拜|月|年)"
_ZH_UNITS = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week",
             "月": "month", "年": "year"}  # fmt: skip
_ZH_WD = r"(?:周|星期|礼拜)(?P<wd>[一二三四五六日天])"
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_ZH_MONTH = r"(?P<month>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])月(?:份)?"
_ZH_DAY = r"(?P<day>[12]\d|3[01]|0?[1-9]|[一二三]?十[一-九]?|[一-九])[日号]"
_ZH_NOT_COUNTED = r"(?<![每一两几数多半上这本\d])"  # 每周三次 is not a Wednesday


def _zh_count(text: str) -> int:
    """3, 三, 十二, 二十, 二十三 (up to 99)."""
    if text.isdigit():
        return int(text)
    if "十" not in text:  # 三 or, digit by digit, 二零
        return int("".join(str(_ZH_DIGITS[d]) for d in text))
    tens, _, ones = text.partition("十")
    return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[ones] if ones else 0)


def _zh_week_day(m: re.Match[str], c: _Ctx) -> Span:
    start = _calendar_window("last" if m["which"] == "上" else "this", "week", c.today)[0]
    return _one_day(start + timedelta(days=_ZH_WEEKDAYS[m["wd"]]))


_ZH_BASE: list[tuple[str, Callable[[re.Match[str], _Ctx], Span]]] = [
    (r"(?P<year>\d{4})年" + _ZH_MONTH + _ZH_DAY,
     lambda m, c: _dated(m["year"], _zh_count(m["month"]), _zh_count(m["day"]), c)),
    (_ZH_MONTH + _ZH_DAY, lambda m, c: _dated(None, _zh_count(m["month"]), _zh_count(m["day"]), c)),
    (r"(?P<year>\d{4})年" + _ZH_MONTH,
     lambda m, c: _unit_window(_latest_month(_zh_count(m["month"]), m["year"], c), "month")),
    (r"(?P<year>\d{4})年", lambda m, c: _unit_window(date(int(m["year"]), 1, 1), "year")),
    (_ZH_MONTH, lambda m, c: _unit_window(_latest_month(_zh_count(m["month"]), None, c), "month")),
    (r"(?P<d>今|昨|前)(?:天|日)",
     lambda m, c: _one_day(c.today - timedelta(days="今昨前".index(m["d"])))),
    (r"(?P<which>上|这|本)(?:个)?(?:周|星期|礼拜)(?P<wd>[一二三四五六日天])", _zh_week_day),
    (r"(?P<which>上|这|本)(?:个|一)?(?P<unit>周|星期|礼拜|月)",
     lambda m, c: _calendar_window("last" if m["which"] == "上" else "this",
                                   _ZH_UNITS[m["unit"]], c.today)),
    (r"(?P<y>今|去|前)年",
     lambda m, c: _unit_window(date(c.today.year - "今去前".index(m["y"]), 1, 1), "year")),
    (_ZH_N + _ZH_UNIT + r"(?:以|之)?前",
     lambda m, c: _unit_window(_back(c.today, _zh_count(m["n"]), _ZH_UNITS[m["unit"]]),
                               _ZH_UNITS[m["unit"]])),
    (r"(?:最近|过去|近)的?" + _ZH_N + _ZH_UNIT,
     lambda m, c: (_back(c.today, _zh_count(m["n"]), _ZH_UNITS[m["unit"]]), None)),
    (_ZH_NOT_COUNTED + _ZH_WD,
     lambda m, c: _one_day(_weekday_back(_ZH_WEEKDAYS[m["wd"]], c, False))),
]  # fmt: skip
_ZH_RULES: list[Rule] = [(re.compile(p), f) for p, f in _ZH_BASE]
_ZH_WHAT = (
    r"(?P<what>" + _ZH_WD.replace("?P<wd>", "?:") + r"|[昨前]天|上(?:个)?(?:周|星期|礼拜|月)"
    r"|[今去]年|本周|这周|本月|(?:\d{4}年)?(?:1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])月)"
)
_ZH_SINCE = _since_start(_ZH_RULES, re.compile(_ZH_WD), _ZH_WEEKDAYS)
ZH = _Table(
    [
        (re.compile(r"(?:自从|自|从)" + _ZH_WHAT + r"(?:以来|开始|起)?"), _ZH_SINCE),
        (re.compile(_ZH_WHAT + r"(?:以来|开始)"), _ZH_SINCE),
        *_ZH_RULES,
    ],
    particle=r"在",
    after=r"的",
)

# Spanish ----------------------------------------------------------------------------
_ES_MONTHS = ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
              "septiembre", "octubre", "noviembre", "diciembre"]  # fmt: skip
_ES_WEEKDAYS = {"lunes": 0, "martes": 1, "miércoles": 2, "miercoles": 2, "jueves": 3,
                "viernes": 4, "sábado": 5, "sabado": 5, "domingo": 6}  # fmt: skip
_ES_NUMBERS = {"un": 1, "una": 1, "uno": 1, "dos": 2, "tres": 3, "cuatro": 4, "cinco": 5,
               "seis": 6, "siete": 7, "ocho": 8, "nueve": 9, "diez": 10, "once": 11,
               "doce": 12}  # fmt: skip
_ES_MONTH = r"(?P<month>" + "|".join([*_ES_MONTHS, "setiembre"]) + r")"
_ES_WD = r"(?P<wd>" + "|".join(_ES_WEEKDAYS) + r")"
_ES_N = r"(?P<n>\d{1,3}|" + "|".join(_ES_NUMBERS) + r")"
_ES_UNIT = r"(?P<unit>d[ií]as?|semanas?|mes(?:es)?|años?)"
_ES_YEAR = r"(?:\s+(?:(?:de|del)\s+)?" + _YEAR + r")"


def _es_unit(text: str) -> str:
    head = text.lower()[:3]
    return {"dia": "day", "día": "day", "sem": "week", "mes": "month"}.get(head, "year")


def _es_count(text: str) -> int:
    return int(text) if text.isdigit() else _ES_NUMBERS[text.lower()]


def _es_month(m: re.Match[str]) -> int:
    name = m["month"].lower()
    return 9 if name == "setiembre" else _ES_MONTHS.index(name) + 1


_ES_BASE: list[tuple[str, Callable[[re.Match[str], _Ctx], Span]]] = [
    (r"(?:(?:el|del)\s+)?(?P<day>\d{1,2})\s+de\s+" + _ES_MONTH + _ES_YEAR + "?",
     lambda m, c: _dated(m["year"], _es_month(m), int(m["day"]), c)),
    (r"hoy", lambda m, c: _one_day(c.today)),
    (r"(?:anteayer|antes\s+de\s+ayer)", lambda m, c: _one_day(c.today - timedelta(days=2))),
    (r"ayer", lambda m, c: _one_day(c.today - timedelta(days=1))),
    (r"(?:(?:en\s+)?(?:los|las)\s+)?[úu]ltim[oa]s\s+" + _ES_N + r"\s+" + _ES_UNIT,
     lambda m, c: (_back(c.today, _es_count(m["n"]), _es_unit(m["unit"])), None)),
    (r"hace\s+" + _ES_N + r"\s+" + _ES_UNIT,
     lambda m, c: _unit_window(_back(c.today, _es_count(m["n"]), _es_unit(m["unit"])),
                               _es_unit(m["unit"]))),
    (r"(?:(?:la|el)\s+)?(?P<unit>semana|mes|año)\s+pasad[oa]",
     lambda m, c: _calendar_window("last", _es_unit(m["unit"]), c.today)),
    (r"est[ea]\s+(?P<unit>semana|mes|año)",
     lambda m, c: _calendar_window("this", _es_unit(m["unit"]), c.today)),
    (r"(?:el\s+)?" + _ES_WD + r"(?:\s+pasado)?",
     lambda m, c: _one_day(_weekday_back(_ES_WEEKDAYS[m["wd"].lower()], c, False))),
    (r"(?:(?:en|de|durante)\s+(?:el\s+mes\s+de\s+)?)?" + _ES_MONTH + _ES_YEAR,
     lambda m, c: _unit_window(_latest_month(_es_month(m), m["year"], c), "month")),
    (r"(?:en|de|durante)\s+(?:el\s+mes\s+de\s+)?" + _ES_MONTH,
     lambda m, c: _unit_window(_latest_month(_es_month(m), None, c), "month")),
    (r"en\s+(?:el\s+(?:año\s+)?)?" + _YEAR,
     lambda m, c: _unit_window(date(int(m["year"]), 1, 1), "year")),
]  # fmt: skip
_ES_RULES: list[Rule] = [(re.compile(rf"\b{p}\b", re.IGNORECASE), f) for p, f in _ES_BASE]
_ES_WHAT = (
    r"(?P<what>(?:el\s+)?" + _ES_WD.replace("?P<wd>", "?:") + r"|anteayer|ayer"
    r"|(?:la|el)\s+(?:semana|mes|año)\s+pasad[oa]|" + _ES_MONTH.replace("?P<month>", "?:")
    + r"(?:\s+(?:de|del)\s+(?:19|20)\d\d)?)"
)  # fmt: skip
_ES_MONTH_START: Rule = (
    re.compile(_ES_MONTH + _ES_YEAR + "?", re.IGNORECASE),
    lambda m, c: (_latest_month(_es_month(m), m["year"], c), None),
)
_ES_SINCE = _since_start(
    [_ES_MONTH_START, *_ES_RULES], re.compile(r"(?:el\s+)?" + _ES_WD, re.IGNORECASE), _ES_WEEKDAYS
)
ES = _Table(
    [(re.compile(r"\bdesde\s+" + _ES_WHAT + r"\b", re.IGNORECASE), _ES_SINCE), *_ES_RULES],
    particle=r"de|del|en|el|la|los|las|sobre|durante|desde",
    after=r"",
)
EN = _Table(
    [(re.compile(rf"\b{p}\b", re.IGNORECASE), f) for p, f in _PATTERNS],
    particle=r"from|in|on|during|of|about",
    after=r"['’]s\b",
)
TABLES = {"en": EN, "zh": ZH, "es": ES}
"""The phrases read in each language; other languages go to `dateparser` alone."""
DEFAULT_LANGUAGES = ("en", "zh")


def parse_time_phrase(
    text: str, now: datetime, languages: Sequence[str] = DEFAULT_LANGUAGES
) -> TimeWindow:
    """Split `text` into a query and the time window its first known phrase names.

    `languages`: whose phrases are read, the person's own first (the module docstring).
    """
    tz = now.tzinfo or UTC
    local = now.astimezone(tz) if now.tzinfo else now.replace(tzinfo=UTC)
    ctx = _Ctx(today=local.date(), now=local, tz=tz)
    best: tuple[int, re.Match[str], Rule, _Table] | None = None
    for table in dict.fromkeys(TABLES[lang] for lang in languages if lang in TABLES):
        for rule in table.rules:
            found = rule[0].search(text)
            if found and (best is None or found.start() < best[0]):
                best = (found.start(), found, rule, table)
    if best is None:
        return _dateparser_phrase(text, ctx, languages)
    _, found, (_, handler), table = best
    try:
        start, end = handler(found, ctx)
    except ValueError:  # a date that does not exist, such as 31 February
        return TimeWindow(text.strip(), None, None)
    return _window(_rest(text, found.start(), found.end(), table), start, end, tz)


def _rest(text: str, start: int, end: int, table: _Table) -> str:
    """`text` without its phrase (and the words that only led into it)."""
    after = re.sub("^(?:" + table.after + ")", "", text[end:]) if table.after else text[end:]
    rest = re.sub(r"\s+", " ", text[:start] + " " + after).strip(" ,.;:-，。、")
    return re.sub(r"\s+(?:" + table.particle + ")$", "", rest, flags=re.IGNORECASE)


def _window(query: str, start: date | None, end: date | None, tz: tzinfo) -> TimeWindow:
    if start is not None and start < FIRST_DAY and (end is None or end > FIRST_DAY):
        start = FIRST_DAY  # what the store can hold; a window wholly before it stays
    return TimeWindow(query, _epoch(start, tz), _epoch(end, tz))


def _dateparser_phrase(text: str, c: _Ctx, languages: Sequence[str]) -> TimeWindow:
    """A phrase the tables miss, read by `dateparser` (loaded here, on first use) in the
    person's languages other than English (whose table is complete), and in Chinese for
    text holding Chinese characters."""
    unchanged = TimeWindow(text.strip(), None, None)
    wanted = [lang for lang in dict.fromkeys(languages) if lang != "en"]
    if not _CJK.search(text):
        wanted = [lang for lang in wanted if lang != "zh"]
    elif "zh" not in wanted:
        wanted.append("zh")
    if not wanted:
        return unchanged
    from dateparser.date import DateDataParser  # slow to import: only when needed
    from dateparser.search import search_dates

    settings: Any = {"RELATIVE_BASE": c.now.replace(tzinfo=None), "PREFER_DATES_FROM": "past"}
    try:
        found = search_dates(text, languages=wanted, settings=settings)
        if not found:
            return unchanged
        phrase = found[0][0]
        data = DateDataParser(
            languages=wanted, settings={**settings, "RETURN_TIME_AS_PERIOD": True}
        ).get_date_data(phrase)
    except (ValueError, OverflowError, KeyError):  # a date that does not exist; no such language
        return unchanged
    if data.date_obj is None or data.period not in _PERIODS or not phrase.strip():
        return unchanged
    if not _CJK.search(phrase) and not any(ch.isdigit() for ch in phrase):
        return unchanged  # a word alone ("mar", the sea, read as a month) is the topic's
    start, end = _unit_window(data.date_obj.date(), data.period)
    at = text.find(phrase)
    table = ZH if _CJK.search(phrase) else TABLES.get(data.locale or "", ES)
    return _window(_rest(text, at, at + len(phrase), table), start, end, c.tz)


def _epoch(day: date | None, tz: tzinfo) -> float | None:
    if day is None:
        return None
    return datetime(day.year, day.month, day.day, tzinfo=tz).timestamp()

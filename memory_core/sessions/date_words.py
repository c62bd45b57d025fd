"""A message's date as words of the word index: month, weekday, year, day of the month.

The store knows when a message was sent, not in which time zone its person
lives, so the date is the one in UTC: a message sent on a Sunday evening in
California is indexed under Monday. Month and weekday names are in the
languages the bot ships (English, Spanish, Chinese): a message of Monday
8 May 2023 is found by "May", "mayo", "5月", "Monday", "lunes", "星期一",
"2023" and "8". The Chinese names are held as the word index holds all CJK
text (`query.cjk_words`: 星期一 → 星期 期一 一), so a query's bigrams match them.

`date_words` gives the words in Python (for the triggers' SQL function and for
PostgreSQL's tsvector); `date_words_sql` is its plain-SQL twin, for the view
the index reads as its content. Both take the second a timestamp falls in
(its floor: neither rounds into the next day), and both give no words for a
time outside the years 1000 to 9999.
"""

from __future__ import annotations

import math
from datetime import date
from functools import lru_cache

from memory_core.sessions.query import cjk_words

__all__ = ["MONTHS", "WEEKDAYS", "date_words", "date_words_sql"]

MONTHS = (
    ("january", "enero", "1月"),
    ("february", "febrero", "2月"),
    ("march", "marzo", "3月"),
    ("april", "abril", "4月"),
    ("may", "mayo", "5月"),
    ("june", "junio", "6月"),
    ("july", "julio", "7月"),
    ("august", "agosto", "8月"),
    ("september", "septiembre", "9月"),
    ("october", "octubre", "10月"),
    ("november", "noviembre", "11月"),
    ("december", "diciembre", "12月"),
)
"""Each month's names in English, Spanish and Chinese, January first."""

WEEKDAYS = (
    ("monday", "lunes", "星期一"),
    ("tuesday", "martes", "星期二"),
    ("wednesday", "miércoles", "星期三"),
    ("thursday", "jueves", "星期四"),
    ("friday", "viernes", "星期五"),
    ("saturday", "sábado", "星期六"),
    ("sunday", "domingo", "星期日"),
)
"""Each weekday's names in English, Spanish and Chinese, Monday first (`date.weekday`)."""

FIRST = -30_610_224_000  # 1000-01-01T00:00:00Z
END = 253_402_300_800  # 10000-01-01T00:00:00Z
_DAY = 86_400
_EPOCH = date(1970, 1, 1).toordinal()
_MONTH_WORDS = tuple(cjk_words(" ".join(names)) for names in MONTHS)
_WEEKDAY_WORDS = tuple(cjk_words(" ".join(names)) for names in WEEKDAYS)


def date_words(timestamp: float) -> str:
    """The words of the UTC date of `timestamp` (unix seconds), as the index holds them.

    "may mayo 5 月  monday lunes  星期 期一 一  2023 8" for Monday 8 May 2023;
    "" for a time outside the years 1000 to 9999 (or not a number).
    """
    if not FIRST <= timestamp < END:  # NaN fails the test too
        return ""
    return _day_words(math.floor(timestamp) // _DAY)


@lru_cache(maxsize=1024)
def _day_words(day: int) -> str:
    """The words of the `day`-th day after 1970-01-01 (an import reads many of one day)."""
    when = date.fromordinal(_EPOCH + day)
    return f"{_MONTH_WORDS[when.month - 1]} {_WEEKDAY_WORDS[when.weekday()]} {when.year} {when.day}"


def date_words_sql(timestamp: str) -> str:
    """Plain SQL giving `date_words` of the SQL expression `timestamp` (the same string)."""
    months = " ".join(f"WHEN '{n:02d}' THEN '{w}'" for n, w in enumerate(_MONTH_WORDS, 1))
    # strftime's %w counts from Sunday (0); WEEKDAYS from Monday
    weekdays = " ".join(f"WHEN '{(n + 1) % 7}' THEN '{w}'" for n, w in enumerate(_WEEKDAY_WORDS))
    whole = f"CAST({timestamp} AS INTEGER)"
    day = f"{whole} - ({timestamp} < {whole}), 'unixepoch'"  # the floor, in seconds
    return (
        f"CASE WHEN {timestamp} >= {FIRST} AND {timestamp} < {END} THEN "
        f"CASE strftime('%m', {day}) {months} END || ' ' || "
        f"CASE strftime('%w', {day}) {weekdays} END || ' ' || "
        f"strftime('%Y', {day}) || ' ' || CAST(strftime('%d', {day}) AS INTEGER) ELSE '' END"
    )

"""Time zones as people write them: IANA names ("Asia/Shanghai") and UTC offsets ("UTC+8")."""

from __future__ import annotations

import re
from datetime import timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

UTC_ZONE = ZoneInfo("UTC")
_OFFSET = re.compile(r"^(?:utc|gmt)?\s*([+-])\s*(\d{1,2})(?::?(00|15|30|45))?$", re.IGNORECASE)
WEST_MOST, EAST_MOST = -12, 14  # the offsets zones on Earth use
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+){0,2}$")


def parse_zone(text: str) -> tzinfo | None:
    """The zone `text` names: an IANA name in any case ("asia/shanghai"), "UTC", or an
    offset from UTC-12 to UTC+14 in hours or with 15, 30 or 45 minutes ("UTC+8",
    "+08:00", "GMT-5", "UTC+5:30", "UTC+05:45"); None when it names none."""
    text = text.strip()
    match = _OFFSET.match(text)
    if match is not None:
        return _offset_zone(match.group(1), int(match.group(2)), int(match.group(3) or 0))
    if not _NAME.match(text):
        return None
    folded = text.casefold()
    exact = next((n for n in _known() if n.casefold() == folded), None)
    if exact is None:
        return None
    try:
        return ZoneInfo(exact)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _offset_zone(sign: str, hours: int, minutes: int) -> tzinfo | None:
    signed = hours * 60 + minutes if sign == "+" else -(hours * 60 + minutes)
    if not WEST_MOST * 60 <= signed <= EAST_MOST * 60:
        return None
    if signed == 0:
        return UTC_ZONE
    if minutes == 0:  # a whole hour: the IANA zone (POSIX "Etc/GMT-8" is UTC+8)
        return ZoneInfo(f"Etc/GMT{'-' if sign == '+' else '+'}{hours}")
    return timezone(timedelta(minutes=signed), f"UTC{sign}{hours}:{minutes:02d}")


def zone_name(zone: tzinfo) -> str:
    """How a zone is shown: its IANA key ("Asia/Shanghai"), "UTC+8" for an offset zone."""
    key = getattr(zone, "key", None) or str(zone)
    if key.startswith("Etc/GMT") and len(key) > len("Etc/GMT"):
        sign = "-" if key[7] == "+" else "+"
        return f"UTC{sign}{key[8:]}"
    return "UTC" if key in {"Etc/UTC", "Etc/GMT", "UTC"} else key


_ZONES: list[str] = []


def _known() -> list[str]:
    if not _ZONES:
        _ZONES.extend(sorted(available_timezones()))
    return _ZONES

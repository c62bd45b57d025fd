"""Time zones as people write them: IANA names ("Asia/Shanghai") and UTC offsets ("UTC+8")."""

from __future__ import annotations

import re
from datetime import tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

UTC_ZONE = ZoneInfo("UTC")
_OFFSET = re.compile(r"^(?:utc|gmt)?\s*([+-])\s*(\d{1,2})(?::?00)?$", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+){0,2}$")


def parse_zone(text: str) -> ZoneInfo | None:
    """The zone `text` names: an IANA name in any case ("asia/shanghai"), "UTC", or a whole
    hour offset ("UTC+8", "+08:00", "GMT-5"); None when it names none."""
    text = text.strip()
    match = _OFFSET.match(text)
    if match is not None:
        hours = int(match.group(2))
        if hours > 14:
            return None
        if hours == 0:
            return UTC_ZONE
        sign = "-" if match.group(1) == "+" else "+"  # POSIX "Etc/GMT-8" is UTC+8
        return ZoneInfo(f"Etc/GMT{sign}{hours}")
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

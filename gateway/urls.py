"""URLs in what Mnemo prints: credentials masked, and URLs checked before a client
would choke on them."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@")
PASSWORD_IN_URL = re.compile(r"://[^/?#\s@:]*:[^/?#\s@]*@|[?&]password=", re.IGNORECASE)
_PASSWORD_PART = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/?#\s@:]*):[^/?#\s@]*@")
_PASSWORD_PARAM = re.compile(r"([?&]password=)[^&#\s]*", re.IGNORECASE)


def redact_url_credentials(text: str) -> str:
    """`text` with the user-info of every URL in it (``user:key@``) replaced by ``***@``."""
    return USERINFO.sub(r"\1***@", text)


def redact_url_password(text: str) -> str:
    """`text` with only the passwords of its URLs masked (``user:***@``, ``password=***``):
    a user name alone is kept, so the URL can be pasted where no password is needed."""
    return _PASSWORD_PARAM.sub(r"\1***", _PASSWORD_PART.sub(r"\1:***@", text))


def check_url(value: str | None, schemes: tuple[str, ...]) -> str | None:
    """Refuse a URL that the HTTP clients would choke on later (`ValueError`)."""
    if value is None:
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ValueError(f"not a valid URL ({exc})") from None
    if parts.scheme not in schemes or not parts.hostname:
        raise ValueError(f"must be a {' or '.join(schemes)} URL")
    return value

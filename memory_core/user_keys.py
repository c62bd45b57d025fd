"""User keys: `<platform>-<platform user id>`, safe to use as a folder name.

The platform is a lowercase identifier (`telegram`, `discord`, `console`). The
user id is kept where it is lowercase ASCII letters, digits, `_` or `.`; every
other byte of its UTF-8 form (including `-`, `%`, `/` and upper-case letters) is
written as `%XX`. The mapping is therefore stable and injective even on a
case-insensitive filesystem: two different users never share a folder, and a
key never holds a path separator or equals `.` or `..`. `check_user_key()`
accepts only keys in exactly this form, so each user has one spelling.
"""

from __future__ import annotations

import re

from memory_core.errors import InvalidUserKeyError

MAX_KEY_LENGTH = 200  # well under the 255-byte file name limit

_PLATFORM = re.compile(r"[a-z0-9_]{1,32}")
_ID_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_.")
_KEY = re.compile(r"([a-z0-9_]{1,32})-((?:[a-z0-9_.]|%[0-9A-F]{2})+)")


def make_user_key(platform: str, user_id: str) -> str:
    """The user key for `user_id` on `platform`, e.g. ``telegram-12345``."""
    if not _PLATFORM.fullmatch(platform):
        raise InvalidUserKeyError(
            f"invalid platform {platform!r}: use lowercase letters, digits and _"
        )
    if not user_id:
        raise InvalidUserKeyError("empty user id")
    return check_user_key(f"{platform}-{_escape(user_id)}")


def check_user_key(key: str) -> str:
    """Return `key` if it is a well-formed user key, else raise `InvalidUserKeyError`."""
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidUserKeyError(f"user key is too long ({len(key)} > {MAX_KEY_LENGTH} chars)")
    match = _KEY.fullmatch(key)
    if not match or _escape_or_none(match.group(2)) != match.group(2):
        raise InvalidUserKeyError(
            f"invalid user key {_shown(key)}: expected <platform>-<user id>, e.g. telegram-12345"
        )
    return key


def split_user_key(key: str) -> tuple[str, str]:
    """The platform and the original user id of a well-formed key."""
    platform, _, escaped = check_user_key(key).partition("-")
    return platform, _unescape(escaped)


def _escape(user_id: str) -> str:
    return "".join(chr(b) if b in _ID_SAFE else f"%{b:02X}" for b in user_id.encode("utf-8"))


def _unescape(escaped: str) -> str:
    out = bytearray()
    i = 0
    while i < len(escaped):
        if escaped[i] == "%":
            out.append(int(escaped[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(ord(escaped[i]))
            i += 1
    return out.decode("utf-8")


def _escape_or_none(escaped: str) -> str | None:
    """Re-escape the decoded id: equal to the input only for the canonical spelling."""
    try:
        return _escape(_unescape(escaped))
    except UnicodeDecodeError:
        return None


def _shown(key: str) -> str:
    return repr(key if len(key) <= 60 else key[:57] + "...")

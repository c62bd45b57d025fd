"""Hidden forms of a text worth a second scan: base64 runs, rot13 and leetspeak.

Both are bounded so a hostile text cannot make the scan slow: at most
`MAX_BASE64_RUNS` runs of at most `MAX_BASE64_CHARS` characters are decoded,
and only those that decode to UTF-8 text. rot13 needs no search: it is one
translation of the whole `latin` view.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
from collections.abc import Iterator

import re2

MAX_BASE64_RUNS = 16
MAX_BASE64_CHARS = 16_384
_MIN_BASE64_CHARS = 16
_PRINTABLE_SHARE = 0.9


@functools.cache
def _base64_run() -> re2._Regexp[str]:
    return re2.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")


def rot13(text: str) -> str:
    """`text` with ASCII letters rotated by 13."""
    return codecs.encode(text, "rot13")


# "1" stands for "i" as often as for "l", so the text is read both ways.
_LEET = (str.maketrans("013457@$|!", "oieastasli"), str.maketrans("013457@$|!", "oleastasli"))


def unleet(text: str) -> tuple[str, ...]:
    """`text` with leetspeak digits and signs read as letters ("1gn0r3" is "ignore").

    Empty when no such sign stands inside a word, so ordinary numbers cost nothing;
    two readings when a "1" can be "i" or "l".
    """
    if _leet_word().search(text) is None:
        return ()
    first = text.translate(_LEET[0])
    return (first,) if "1" not in text else (first, text.translate(_LEET[1]))


@functools.cache
def _leet_word() -> re2._Regexp[str]:
    return re2.compile(r"[A-Za-z][013457@$|!]+[A-Za-z]|\b[013457@$|][A-Za-z]{2}")


def base64_texts(text: str) -> Iterator[str]:
    """The text hidden in each base64-looking run of `text`, bounded as the module says."""
    runs = 0
    for found in _base64_run().finditer(text):
        run = found.group(0)
        if len(run) > MAX_BASE64_CHARS or len(run.rstrip("=")) < _MIN_BASE64_CHARS:
            continue
        decoded = _decode(run)
        if decoded is not None:
            yield decoded
        runs += 1
        if runs >= MAX_BASE64_RUNS:
            return


def _decode(run: str) -> str | None:
    padded = run.rstrip("=") + "=" * (-len(run.rstrip("=")) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = sum(ch.isprintable() or ch.isspace() for ch in decoded)
    if not decoded or printable < _PRINTABLE_SHARE * len(decoded):
        return None
    return decoded

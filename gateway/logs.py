"""Log lines on stderr: plain text or one JSON object per line, secrets masked.

stdout belongs to the console. Every line, tracebacks included, has each
secret (the bot tokens, the API key) written as ``***``. What the libraries
say too often is kept out: the per-request lines of the HTTP clients (one per
model call) show only at DEBUG, and discord.py's warning that voice is not
supported is dropped, since Mnemo uses no voice.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Literal

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REQUEST_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2")  # a line per request, at INFO
QUIET_LOGGERS = ("apscheduler", "telegram", "aiohttp")  # warnings and errors only
VOICE_LOGGER = "discord.client"
PTB_REQUEST_LOGGER = "telegram.request.BaseRequest"  # its one line: an answer not JSON
PTB_LIMITER_LOGGER = "telegram.ext.AIORateLimiter"  # a flood wait, which we wait out
POOL_LOGGER = "psycopg.pool"  # a line per dead connection and per failed reconnect
POOL_LINES_EVERY = 60.0  # seconds: each kind of pool line at most once in them


class MaskingFormatter(logging.Formatter):
    """A text formatter that writes each secret as ``***`` (in tracebacks too)."""

    def __init__(self, fmt: str, secrets: Sequence[str]) -> None:
        super().__init__(fmt)
        self._secrets = [s for s in secrets if s]

    def format(self, record: logging.LogRecord) -> str:
        return self.mask(super().format(record))

    def mask(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


class JsonFormatter(MaskingFormatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and the
    traceback as `exc_info` when there is one; secrets masked in every field."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__("%(message)s", secrets)

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": self.mask(record.getMessage()),
        }
        if record.exc_info:
            line["exc_info"] = self.mask(self.formatException(record.exc_info))
        return json.dumps(line, ensure_ascii=False)


def _request_at_debug(record: logging.LogRecord) -> bool:
    """An HTTP client's INFO line about one request is a DEBUG line."""
    if record.levelno == logging.INFO:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
    return True


def _not_about_voice(record: logging.LogRecord) -> bool:
    return "voice will NOT be supported" not in record.getMessage()


def not_unreadable_json(record: logging.LogRecord) -> bool:
    """PTB's traceback for a Bot API answer that is not JSON is left out: the adapter says
    it in one line of its own (the delivery taken as done, or the failed poll)."""
    return not record.getMessage().startswith("Can not load invalid JSON data")


def not_a_flood_wait(record: logging.LogRecord) -> bool:
    """PTB's traceback for each flood wait (its limiter makes no retries: ours do) is left
    out: the wait is the adapter's to take, and to log when it gives up."""
    return not record.getMessage().startswith("Rate limit hit after maximum of")


class OncePerKind:
    """Lets each kind of line through at most once every `every` seconds (the kind: the
    message up to its first colon or "<", its numbers left out, so "discarding broken
    connection: <…>" lines are one kind); an outage of the database is one line per
    kind, not hundreds."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._every, self._clock = every, clock
        self._last: dict[str, float] = {}

    def __call__(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        kind = re.sub(r"\d+", "#", text.split(":", 1)[0].split("<", 1)[0][:80])
        now = self._clock()
        if now - self._last.get(kind, -self._every) < self._every:
            return False
        self._last[kind] = now
        return True


_POOL_LINES = OncePerKind(POOL_LINES_EVERY)


def configure_logging(
    level: int, secrets: Sequence[str] = (), log_format: LogFormat = "text"
) -> None:
    """Logs to stderr at `level` in `log_format`, secrets masked. The handler is installed
    once per process (tests install their own); the libraries' levels and filters each
    time (they are idempotent)."""
    root = logging.getLogger()
    if not root.handlers:  # the first run of this process
        handler = logging.StreamHandler(sys.stderr)
        formatter = (
            JsonFormatter(secrets)
            if log_format == "json"
            else MaskingFormatter(TEXT_FORMAT, secrets)
        )
        handler.setFormatter(formatter)
        root.addHandler(handler)
        root.setLevel(level)
    for name in REQUEST_LOGGERS:
        requests = logging.getLogger(name)
        requests.setLevel(logging.DEBUG if level <= logging.DEBUG else logging.WARNING)
        _add_filter(requests, _request_at_debug)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    _add_filter(logging.getLogger(VOICE_LOGGER), _not_about_voice)
    _add_filter(logging.getLogger(PTB_REQUEST_LOGGER), not_unreadable_json)
    _add_filter(logging.getLogger(PTB_LIMITER_LOGGER), not_a_flood_wait)
    _add_filter(logging.getLogger(POOL_LOGGER), _POOL_LINES)


def _add_filter(logger: logging.Logger, check: Callable[[logging.LogRecord], bool]) -> None:
    if check not in logger.filters:
        logger.addFilter(check)

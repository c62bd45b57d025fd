"""How long a test waits, scaled by one factor.

Every deadline in the tests (a polled condition, `asyncio.wait_for`, a subprocess's
`timeout=`, a thread's join, pytest-timeout's per-test limit) goes through `scaled`, so
a busy machine gets more time from one setting: ``MNEMO_TEST_TIME_SCALE=3`` triples them
all (default 1). The environment variable is read here and nowhere else.

What is NOT scaled: a timeout handed to the code under test when the test is about that
timeout (the bot gives up after 0.2 s: the bot is given 0.2 s; only how long the test
waits to see it give up is scaled).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

T = TypeVar("T")

ENV = "MNEMO_TEST_TIME_SCALE"


def time_scale(environ: Mapping[str, str] = os.environ) -> float:
    """The factor from `environ` (1 when unset); a value that is not a positive number fails."""
    raw = environ.get(ENV, "").strip()
    if not raw:
        return 1.0
    try:
        factor = float(raw)
    except ValueError:
        raise ValueError(f"{ENV}={raw!r}: not a number") from None
    if not factor > 0 or factor == float("inf"):
        raise ValueError(f"{ENV}={raw!r}: must be a positive number")
    return factor


SCALE = time_scale()


def scaled(seconds: float) -> float:
    """`seconds` times the factor: how long a test may wait for something."""
    return seconds * SCALE


async def wait_until(
    probe: Callable[[], T | Awaitable[T]],
    timeout: float = 5.0,
    what: str = "",
    interval: float = 0.01,
) -> T:
    """Poll `probe` (sync or async) until it is truthy and return its value; TimeoutError
    after `scaled(timeout)` seconds."""
    limit = scaled(timeout)
    deadline = time.monotonic() + limit
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {limit:g} s: {what or 'the condition'}")
        await asyncio.sleep(interval)


def wait_until_sync(
    probe: Callable[[], T], timeout: float = 20.0, what: str = "", interval: float = 0.02
) -> T:
    """`wait_until` for a thread with no event loop (another process's progress)."""
    limit = scaled(timeout)
    deadline = time.monotonic() + limit
    while not (value := probe()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {limit:g} s: {what or 'the condition'}")
        time.sleep(interval)
    return value

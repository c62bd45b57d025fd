"""A clock a test sets by hand: ``clock.now = ...``; the code under test calls it."""

from __future__ import annotations


class Clock:
    """Seconds since the epoch, as the test last set them (`now`)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

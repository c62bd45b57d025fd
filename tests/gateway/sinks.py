"""A reply sink for tests: every reply as one string, and the buttons offered with it."""

from __future__ import annotations

from gateway.messages import Choice


class ListSink:
    """Collects each reply: the pieces written, closed by `finish`; `offer` records buttons."""

    def __init__(self) -> None:
        self.replies: list[str] = []
        self.buttons: list[Choice] = []
        self._pieces: list[str] = []

    @property
    def unfinished(self) -> str:
        """What was written of the reply in progress (not finished yet)."""
        return "".join(self._pieces)

    async def offer(self, choices: tuple[Choice, ...]) -> None:
        self.buttons = list(choices)

    async def write(self, piece: str) -> None:
        self._pieces.append(piece)

    async def finish(self) -> None:
        self.replies.append("".join(self._pieces))
        self._pieces = []

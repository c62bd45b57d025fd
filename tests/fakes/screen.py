"""A small VT100 screen: what a person at a terminal sees of what a program printed.

It understands what prompt_toolkit's VT100 output writes for a prompt (text,
CR/LF, backspace, cursor moves, erase to the end of the line or the screen)
and ignores the modes and colours; a line feed also returns the carriage, as
a terminal's output processing does. Wide characters (emoji, CJK) take two
cells.
"""

from __future__ import annotations

import re

from wcwidth import wcwidth

_TOKEN = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b[()][A-Z0-9]|\x1b.|[\s\S]")


class Screen:
    """Feed it the bytes printed (as text); read the lines and the cursor."""

    def __init__(self) -> None:
        self.lines: list[list[str]] = [[]]
        self.row = 0
        self.col = 0

    def feed(self, text: str) -> Screen:
        for match in _TOKEN.finditer(text):
            if match[2] is not None:
                self._csi(match[1], match[2])
            elif not match[0].startswith("\x1b"):
                self._char(match[0])
        return self

    def text(self) -> str:
        """Every line, right spaces removed."""
        return "\n".join("".join(line).rstrip() for line in self.lines).rstrip("\n")

    def cursor_line(self) -> str:
        """The line the cursor is on, up to the cursor (what a prompt shows so far)."""
        return "".join(self._line()[: self.col]).ljust(self.col)

    def _line(self) -> list[str]:
        while len(self.lines) <= self.row:
            self.lines.append([])
        return self.lines[self.row]

    def _char(self, char: str) -> None:
        if char == "\r":
            self.col = 0
        elif char == "\n":
            self.row, self.col = self.row + 1, 0
        elif char == "\x08":
            self.col = max(0, self.col - 1)
        elif char >= " ":
            line = self._line()
            width = max(wcwidth(char), 1)
            while len(line) < self.col + width:
                line.append(" ")
            line[self.col : self.col + width] = [char] + [""] * (width - 1)
            self.col += width

    def _csi(self, params: str, final: str) -> None:
        if params.startswith("?"):
            return  # modes (cursor shown, bracketed paste …)
        numbers = [int(p) if p else 0 for p in params.split(";")] if params else []
        n = max(numbers[0], 1) if numbers else 1
        if final == "A":
            self.row = max(0, self.row - n)
        elif final == "B":
            self.row += n
        elif final == "C":
            self.col += n
        elif final == "D":
            self.col = max(0, self.col - n)
        elif final == "K":
            del self._line()[self.col :]
        elif final == "J" and (numbers or [0])[0] == 0:
            del self._line()[self.col :]
            del self.lines[self.row + 1 :]
        elif final in "Hf":
            self.row = max((numbers or [1])[0], 1) - 1
            self.col = max((numbers[1:] or [1])[0], 1) - 1

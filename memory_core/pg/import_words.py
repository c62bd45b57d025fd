"""An import's rows as COPY text, made beside the COPY: in worker processes when large.

Each message's row, but for its session id (`copy_lines`: the COPY text format,
escaped), holds its words as a tsvector literal (`index_literals`) and its
`symbols` value (`symbols_value`), so the import's own process only puts the
session id before each line and streams bytes. The words are
`search_text.index_documents`' tokens, written as a literal that names a
lexeme once per position (``'a':1 'b':2 'a':3``): the server's tsvector input
sorts and merges them into the very value `index_documents`' literal gives
(``'a':1,3 'b':2``), and the line is made with a few joins instead of a loop
over the tokens. Where a tsvector limit could apply (a lexeme of more than
`MAX_POSITIONS` positions, a long lexeme, a quote), the literal is
`index_documents`' own.

That is Python and holds the GIL: on a thread it only takes turns with the
import's writer. An import's full chunks (`POOL_MIN_ROWS` messages or more) are
therefore split among `workers()` processes started for the import: each a
fresh interpreter (``python -m memory_core.pg.import_words``, never a fork of
this process, whose threads and connections a fork would copy) that reads
pickled rows on its stdin and writes their lines on its stdout, and keeps what
its FTS5 table answered, so it asks less chunk after chunk. A smaller import,
or a machine of one core, makes them on a thread, as a turn does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import re
import struct
import sys
from collections import Counter
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import BinaryIO

from memory_core.errors import SessionStoreError
from memory_core.pg.search_text import (
    ABOUT_CACHE,
    ABOUT_WEIGHT,
    MAX_LEXEME_BYTES,
    MAX_POSITION,
    MAX_POSITIONS,
    MAX_VECTOR_BYTES,
    IndexRow,
    _About,
    _literal,
    _tokenized,
)
from memory_core.sessions.query import SYMBOL_CLASS

__all__ = [
    "POOL_MIN_ROWS",
    "ImportRow",
    "ImportWords",
    "copy_lines",
    "index_literals",
    "serve",
    "symbols_value",
    "workers",
]

POOL_MIN_ROWS = 2000  # a chunk this large or larger goes to the worker processes
MAX_WORKERS = 4
_SIZE = struct.Struct("!Q")
_SYMBOL = re.compile(f"[{SYMBOL_CLASS}]")
_SHORT = MAX_LEXEME_BYTES // 4  # a token of this many characters or fewer is never cut
# "':N '" for each position N: a token's entry ends with it, the next one's quote opening;
# "':NA '" the same for an `about` token's (weighted ABOUT_WEIGHT)
_AT = [f"':{n} '" for n in range(MAX_POSITION + 1)]
_AT_ABOUT = [f"':{n}{ABOUT_WEIGHT} '" for n in range(MAX_POSITION + 1)]
_NULL = "\\N"

ImportRow = tuple[str, str, str | None, str | None, str | None, float, str | None]
"""A message's columns but its session: (role, content, tool_name, tool_calls,
tool_call_id, timestamp, speaker_name)."""


def symbols_value(role: str, content: str) -> str | None:
    """What a message keeps in `symbols`: its content when it holds an emoji or symbol
    (and it is not tool output), else None: the rows of SQLite's trigram index."""
    if role == "tool" or content.isascii() or _SYMBOL.search(content) is None:
        return None
    return content


def index_literals(rows: Sequence[IndexRow]) -> list[str | None]:
    """Literals of the tsvectors `search_text.index_documents` gives `rows`, a lexeme
    named once per position where no limit applies (see the module docstring)."""
    abouts, words, texts = _tokenized(rows)
    flat = _FLAT_ABOUTS
    if len(flat) > ABOUT_CACHE:
        flat.clear()
    for about in words:
        if about not in flat:
            pairs = [(t, p) for t, at in words[about].tokens for p in at]
            flat[about] = ([t for t, _ in pairs], [p for _, p in pairs])
    return [
        _flat(tokens, words[about], flat[about])
        for tokens, about in zip(texts, abouts, strict=True)
    ]


_FLAT_ABOUTS: dict[str, tuple[list[str], list[int]]] = {}  # each `about` token at a position


def _flat(tokens: list[str], about: _About, flat: tuple[list[str], list[int]]) -> str | None:
    """One message's literal: each text token at its position, then the `about` words
    (`flat`: each at its position among them)."""
    n = len(tokens)
    joined = "".join(tokens)
    if (
        not n
        or about.odd
        or n + 1 + about.last > MAX_POSITION
        or "'" in joined
        or "\\" in joined
        or (len(joined) + about.chars) * 4 > MAX_VECTOR_BYTES
        or (len(joined) > _SHORT and max(map(len, tokens)) > _SHORT)
        or (n + about.most > MAX_POSITIONS
            and max(Counter(tokens).values()) + about.most > MAX_POSITIONS)
    ):  # fmt: skip
        return _grouped(tokens, about)
    about_tokens, offsets = flat
    parts = [""] * (2 * (n + len(about_tokens)))
    parts[: 2 * n : 2] = tokens
    parts[1 : 2 * n : 2] = _AT[1 : n + 1]
    parts[2 * n :: 2] = about_tokens
    parts[2 * n + 1 :: 2] = map(_AT_ABOUT.__getitem__, map((n + 1).__add__, offsets))
    return "'" + "".join(parts)[:-2]


def _grouped(tokens: list[str], about: _About) -> str | None:
    """`index_documents`' own literal of one message's tokens."""
    if not tokens:
        return _literal({}, about, 1) if about.tokens else None
    positions: dict[str, list[int]] = {}
    for n, token in enumerate(tokens, 1):
        positions.setdefault(token, []).append(n)
    return _literal(positions, about, len(tokens) + 1)


def _text(value: str) -> str:
    """`value` as a field of COPY's text format (backslash, tab, newline, return escaped)."""
    if "\\" in value:
        value = value.replace("\\", "\\\\")
    if "\t" in value:
        value = value.replace("\t", "\\t")
    if "\n" in value:
        value = value.replace("\n", "\\n")
    if "\r" in value:
        value = value.replace("\r", "\\r")
    return value


def _field(value: str | None) -> str:
    return _NULL if value is None else _text(value)


def copy_lines(rows: Sequence[ImportRow]) -> list[bytes]:
    """Each row's COPY text line for the columns role, content, tool_name, tool_calls,
    tool_call_id, timestamp, speaker_name, words, symbols (its session id to be put
    before it, then a tab), UTF-8, newline-terminated."""
    words = index_literals([(r[0], r[1], r[5], r[6]) for r in rows])
    return [
        "\t".join((_text(role), _text(content), _field(tool), _field(calls), _field(call),
                   repr(ts), _field(name), _field(vector),
                   _field(symbols_value(role, content)))).encode() + b"\n"
        for (role, content, tool, calls, call, ts, name), vector in zip(rows, words, strict=True)
    ]  # fmt: skip


def workers() -> int:
    """How many processes make words: one a core, none past `MAX_WORKERS`; 0 (a thread)
    on a machine of one core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(MAX_WORKERS, cores or 1) if (cores or 1) > 1 else 0


class _Worker:
    """One worker process, asked one part at a time: a second part waits for the answer
    to the first (else each side could wait for the other to read its pipe)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.turn = asyncio.Lock()

    async def lines(self, rows: Sequence[ImportRow]) -> list[bytes]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        data = pickle.dumps(list(rows), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            async with self.turn:
                stdin.write(_SIZE.pack(len(data)) + data)
                await stdin.drain()  # the worker reads all of it before it answers
                size = _SIZE.unpack(await stdout.readexactly(_SIZE.size))[0]
                ok, answer = pickle.loads(await stdout.readexactly(size))
        except (asyncio.IncompleteReadError, ConnectionError):
            raise SessionStoreError(
                f"an import's word process stopped (exit code {self.process.returncode})"
            ) from None
        if not ok:
            raise SessionStoreError(f"an import's word process failed: {answer}")
        return list(answer)


class ImportWords:
    """`copy_lines` for an import's chunks; `close` ends the worker processes."""

    def __init__(self, processes: int | None = None) -> None:
        self._processes = workers() if processes is None else processes
        self._workers: list[_Worker] = []
        self._starting: asyncio.Future[list[_Worker]] | None = None

    async def lines(self, rows: Sequence[ImportRow]) -> list[bytes]:
        """The COPY lines of `rows`, in order (`copy_lines`)."""
        if self._processes < 1 or len(rows) < POOL_MIN_ROWS:
            return await asyncio.to_thread(copy_lines, rows)
        if self._starting is None:  # once, though the next chunk may come meanwhile
            self._starting = asyncio.gather(*(_start() for _ in range(self._processes)))
        if not self._workers:
            self._workers = list(await asyncio.shield(self._starting))
        step = -(-len(rows) // len(self._workers))
        parts = [
            asyncio.ensure_future(worker.lines(rows[n * step : (n + 1) * step]))
            for n, worker in enumerate(self._workers)
        ]
        try:
            done = await asyncio.gather(*parts)
        except BaseException:
            for part in parts:
                part.cancel()
            await self.close()  # a worker left mid-answer cannot be asked again
            raise
        return list(chain.from_iterable(done))

    async def close(self) -> None:
        """End the worker processes (their stdin closed: each exits when it reads no more)."""
        if self._starting is not None and not self._workers:
            with contextlib.suppress(Exception):
                self._workers = list(await self._starting)
        running, self._workers = self._workers, []
        for worker in running:
            if worker.process.stdin is not None:
                worker.process.stdin.close()
        for worker in running:
            try:
                await asyncio.wait_for(worker.process.wait(), 5)
            except TimeoutError:
                worker.process.kill()
                await worker.process.wait()


async def _start() -> _Worker:
    """A worker process importing this package from where this process did."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": root if not path else f"{root}{os.pathsep}{path}"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", __name__, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    return _Worker(process)


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """A worker's loop: pickled rows in, (True, lines) or (False, error) out, until EOF."""
    while header := stdin.read(_SIZE.size):
        rows = pickle.loads(stdin.read(_SIZE.unpack(header)[0]))
        try:
            answer: tuple[bool, object] = (True, copy_lines(rows))
        except Exception as exc:  # sent back, to be raised in the import
            answer = (False, f"{type(exc).__name__}: {exc}")
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.write(_SIZE.pack(len(data)) + data)
        stdout.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)

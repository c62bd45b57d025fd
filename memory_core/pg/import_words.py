"""The words of an import's messages, made beside the COPY: in worker processes when large.

`search_text.index_documents` is Python (the FTS5 table is asked only what it
was not asked before) and holds the GIL: on a thread it only takes turns with
the import's writer. An import's full chunks (`POOL_MIN_ROWS` messages or
more) are therefore split among `workers()` processes started for the import:
each a fresh interpreter (``python -m memory_core.pg.import_words``, never a
fork of this process, whose threads and connections a fork would copy) that
reads pickled rows on its stdin and writes their literals on its stdout, and
keeps what its FTS5 table answered, so it asks less chunk after chunk. A
smaller import, or a machine of one core, makes them on a thread, as a turn does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import struct
import sys
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import BinaryIO

from memory_core.errors import SessionStoreError
from memory_core.pg.search_text import IndexRow, index_documents

__all__ = ["POOL_MIN_ROWS", "ImportWords", "serve", "workers"]

POOL_MIN_ROWS = 2000  # a chunk this large or larger goes to the worker processes
MAX_WORKERS = 4
_SIZE = struct.Struct("!Q")


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

    async def words(self, docs: Sequence[IndexRow]) -> list[str | None]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        data = pickle.dumps(list(docs), protocol=pickle.HIGHEST_PROTOCOL)
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
    """`index_documents` for an import's chunks; `close` ends the worker processes."""

    def __init__(self, processes: int | None = None) -> None:
        self._processes = workers() if processes is None else processes
        self._workers: list[_Worker] = []
        self._starting: asyncio.Future[list[_Worker]] | None = None

    async def of(self, docs: Sequence[IndexRow]) -> list[str | None]:
        """The tsvector literals of `docs`, in order."""
        if self._processes < 1 or len(docs) < POOL_MIN_ROWS:
            return await asyncio.to_thread(index_documents, docs)
        if self._starting is None:  # once, though the next chunk may come meanwhile
            self._starting = asyncio.gather(*(_start() for _ in range(self._processes)))
        if not self._workers:
            self._workers = list(await asyncio.shield(self._starting))
        step = -(-len(docs) // len(self._workers))
        parts = [
            asyncio.ensure_future(worker.words(docs[n * step : (n + 1) * step]))
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
    """A worker's loop: pickled rows in, (True, literals) or (False, error) out, until EOF."""
    while header := stdin.read(_SIZE.size):
        docs = pickle.loads(stdin.read(_SIZE.unpack(header)[0]))
        try:
            answer: tuple[bool, object] = (True, index_documents(docs))
        except Exception as exc:  # sent back, to be raised in the import
            answer = (False, f"{type(exc).__name__}: {exc}")
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.write(_SIZE.pack(len(data)) + data)
        stdout.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)

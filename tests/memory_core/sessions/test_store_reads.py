"""Reads of the async store: a runaway query stops when its caller gives up or its time runs out.

The runaway query is made slow on purpose, through the store's `on_connect`
hook: `instr()`, which a one-character emoji search calls once per message,
becomes a Python function that takes a few milliseconds per row, so a search
of the "runaway" person's thousands of messages runs for many seconds.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from memory_core.errors import ReadTimeoutError
from memory_core.scopes import SearchScope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.store import SessionStore
from tests.memory_core.sessions.helpers import message, origin, say
from tests.timing import scaled
from tests.timing import wait_until as until

ROWS = 5000
ROW_SECONDS = 0.002  # a runaway search costs ROWS * ROW_SECONDS = 10 s
RUNAWAY = SearchScope("runaway")
INNOCENT = SearchScope("innocent")


class SlowInstr:
    """`instr()` at a few milliseconds a row; knows which threads are inside it now."""

    def __init__(self) -> None:
        self.inside: set[int] = set()
        self.entered: set[int] = set()
        self._lock = threading.Lock()

    def __call__(self, haystack: str, needle: str) -> int:
        me = threading.get_ident()
        with self._lock:
            self.inside.add(me)
            self.entered.add(me)
        try:
            time.sleep(ROW_SECONDS)  # the cost of the row, not a wait for anything
            return haystack.find(needle) + 1
        finally:
            with self._lock:
                self.inside.discard(me)

    def install(self, conn: sqlite3.Connection) -> None:
        conn.create_function("instr", 2, self)


class SlowSteps(SlowInstr):
    """Any statement at a few milliseconds per ten SQLite steps (a progress handler)."""

    def step(self) -> int:
        self("", "")
        return 0  # carry on

    def install(self, conn: sqlite3.Connection) -> None:
        conn.set_progress_handler(self.step, 10)


async def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    await until(condition, timeout, interval=0.005)


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("runaway") / "state.db"
    with SessionDB(path) as db:
        rows = [message(f"🌦 report {i}", float(i)) for i in range(ROWS)]
        db.append_messages(origin=origin("runaway"), messages=rows)
        say(db, "my garden has tomatoes", user="innocent")
    return path


@pytest.fixture
def slow() -> SlowInstr:
    return SlowInstr()


@pytest.fixture
async def store(database: Path, slow: SlowInstr) -> AsyncIterator[SessionStore]:
    async with SessionStore(database, readers=2, on_connect=slow.install) as opened:
        yield opened


async def test_cancelled_runaway_queries_free_the_readers(
    store: SessionStore, slow: SlowInstr
) -> None:
    runaway = [asyncio.create_task(store.search("🌦", RUNAWAY)) for _ in range(3)]
    await wait_until(lambda: len(slow.inside) == 2)  # both readers busy, a third search queued
    for task in runaway:
        task.cancel()
    await asyncio.gather(*runaway, return_exceptions=True)
    await wait_until(lambda: not slow.inside, timeout=5.0)  # a 10 s query let go of its reader
    async with asyncio.timeout(scaled(5.0)):
        hits = await store.search("tomatoes", INNOCENT)
    assert len(hits) == 1 and "tomatoes" in hits[0].snippets[0].text
    assert len(slow.entered) == 2  # the queued third search never started


async def test_readers_stay_usable_after_an_interrupt(store: SessionStore, slow: SlowInstr) -> None:
    runaway = [asyncio.create_task(store.search("🌦", RUNAWAY)) for _ in range(2)]
    await wait_until(lambda: len(slow.inside) == 2)
    for task in runaway:
        task.cancel()
    await asyncio.gather(*runaway, return_exceptions=True)
    # every reader answers again, and no interrupt is left over for a later query
    for _ in range(3):
        found = await asyncio.gather(*(store.search("tomatoes", INNOCENT) for _ in range(4)))
        assert [len(hits) for hits in found] == [1, 1, 1, 1]
    mine = await store.search("🌦", SearchScope("innocent"))
    assert mine == []


async def test_a_query_past_the_read_timeout_is_stopped(database: Path, slow: SlowInstr) -> None:
    async with SessionStore(
        database, readers=1, on_connect=slow.install, read_timeout=0.2
    ) as store:
        with pytest.raises(ReadTimeoutError, match=r"took over 0.2 s and was stopped"):
            async with asyncio.timeout(scaled(5.0)):
                await store.search("🌦", RUNAWAY)
        assert not slow.inside
        hits = await store.search("tomatoes", INNOCENT)  # the one reader answers again
        assert len(hits) == 1


async def test_ordinary_reads_are_untouched_by_the_limit(database: Path) -> None:
    async with SessionStore(database, read_timeout=5.0) as store:
        hits = await store.search("🌦", RUNAWAY)
        assert len(hits) == 1 and len(hits[0].snippets) == 3
        assert await store.get_messages(hits[0].session_id, INNOCENT) == []

"""Imports in short transactions: hidden until published, live writes in between, round trips."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memory_core.errors import ImportFormatError
from memory_core.scopes import SearchScope
from memory_core.sessions import SessionStore, WritePolicy
from memory_core.sessions.db import SessionDB
from memory_core.sessions.importer import STAGED_PREFIX
from tests.memory_core.sessions.helpers import message, origin
from tests.timing import scaled, wait_until_sync

ME = SearchScope("telegram-1")


def line(n: int, **fields: object) -> str:
    record = {
        "session": f"s{n // 10}", "user": "telegram-1", "platform": "telegram",
        "chat": "c1", "chat_type": "private", "role": "user",
        "content": f"imported ferry note {n}", "timestamp": 1_700_000_000 + n,
    }  # fmt: skip
    record.update(fields)
    return json.dumps(record)


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    wait_until_sync(condition, timeout, interval=0.01)


def counts(path: Path) -> tuple[int, int, int]:
    """Sessions, messages, and staged (hidden) sessions, read from another connection."""
    conn = sqlite3.connect(path)
    try:
        return (
            conn.execute("SELECT count(*) FROM sessions").fetchone()[0],
            conn.execute("SELECT count(*) FROM messages").fetchone()[0],
            conn.execute(
                "SELECT count(*) FROM sessions WHERE user_key >= ?", (STAGED_PREFIX,)
            ).fetchone()[0],
        )
    finally:
        conn.close()


class PausedLines:
    """Lines for an import that stop after `first` until `release` is set."""

    def __init__(self, first: list[str], rest: list[str]) -> None:
        self.first, self.rest = first, rest
        self.release = threading.Event()

    def __iter__(self) -> Iterator[str]:
        yield from self.first
        assert self.release.wait(scaled(30))
        yield from self.rest


def run_in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []

    def target() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # handed to the test, which asserts on it
            out.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, out


def test_staged_rows_stay_hidden_and_live_writes_in_between_are_indexed(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    first = [line(n) for n in range(5000)]  # one parser batch: it is written before the pause
    lines = PausedLines(first, [line(n) for n in range(5000, 5020)])
    with SessionDB(path) as importing, SessionDB(path) as live:
        thread, out = run_in_thread(lambda: importing.import_lines(lines, chunk_rows=500))
        wait_for(lambda: counts(path)[1] == 5000)  # committed, chunk by chunk
        assert counts(path)[2] == 500  # every imported session is staged
        assert live.search("ferry", ME) == [] and list(live.export_lines("telegram-1")) == []
        assert live.list_sessions(ME) == []
        # the bot writes while the import is under way: not blocked, indexed by the trigger
        sid = live.append_message(origin=origin(), message=message("live walrus", 5.0)).session_id
        assert [h.session_id for h in live.search("walrus", ME)] == [sid]
        lines.release.set()
        thread.join(scaled(30))
        assert out[0].messages_inserted == 5020  # type: ignore[attr-defined]
        assert counts(path) == (503, 5021, 0)
        assert [h.session_id for h in live.search("walrus", ME)] == [sid]
        assert len(live.search("imported ferry", ME)) > 0
        assert len(list(live.export_lines("telegram-1"))) == 5021
        live.check()


def test_a_bad_line_after_several_chunks_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        db.append_message(origin=origin(), message=message("kept"))
        before = counts(path)
        lines = [line(n) for n in range(5100)] + ['{"session": 1}']
        with pytest.raises(ImportFormatError, match=r"^line 5101: "):
            db.import_lines(lines, chunk_rows=500)
        assert counts(path) == before
        db.check()


def test_an_import_left_behind_is_cleaned_up_by_the_next(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        lines = PausedLines([line(n) for n in range(5000)], [])
        thread, _ = run_in_thread(lambda: db.import_lines(lines, chunk_rows=1000))
        wait_for(lambda: counts(path)[1] == 5000)
        # A second import waits for nobody: the lock file says one is running.
        with SessionDB(path) as other, pytest.raises(Exception, match="another import"):
            other.import_lines([line(1)])
        lines.release.set()
        thread.join(scaled(30))
        assert counts(path) == (500, 5000, 0)


def test_export_then_import_into_the_same_database_adds_nothing(tmp_path: Path) -> None:
    with SessionDB(tmp_path / "state.db") as db:
        first = db.append_messages(
            origin=origin(), messages=[message("bot kayak", 10.5), message("reply", 11.25)]
        )
        db.end_session(first.session_id, "new_session")
        db.start_child_session(
            db.append_message(origin=origin(), message=message("second", 20.0)).session_id
        )
        db.append_message(origin=origin(), message=message("child kayak", 30.0))
        exported = list(db.export_lines("telegram-1"))
        before = counts(tmp_path / "state.db")
        result = db.import_lines(exported)
        assert (result.sessions_created, result.messages_inserted) == (0, 0)
        assert result.messages_skipped == 4
        assert counts(tmp_path / "state.db") == before
        assert db.current_session(origin().session_key) is not None  # still open
        assert list(db.export_lines("telegram-1")) == exported
        db.check()
        with SessionDB(tmp_path / "fresh.db") as fresh:
            fresh.import_lines(exported)
            copied = list(fresh.export_lines("telegram-1"))
            assert copied == exported
            assert fresh.import_lines(copied).messages_inserted == 0
        # and the copy, imported back into the bot's database, adds nothing either
        assert db.import_lines(copied).messages_inserted == 0
        assert counts(tmp_path / "state.db") == before


@pytest.mark.slow
async def test_a_live_turn_stores_its_message_while_a_long_import_runs(tmp_path: Path) -> None:
    """The import holds the lock in chunks of 5,000 rows, so the write gets in before it ends.

    (Before, the import was one transaction: the write waited for all of it.)
    """
    path = tmp_path / "state.db"
    lines = [
        line(n, content=f"bulk {n} {'天气 ' * (n % 10 == 0)}" + "word " * 30) for n in range(60_000)
    ]
    policy = WritePolicy(busy_timeout=0.2, wait_timeout=5.0)
    async with SessionStore(path, writes=policy) as store:
        started = threading.Event()

        def do_import() -> object:
            with SessionDB(path) as db:
                return db.import_lines(lines, progress=lambda _n: started.set())

        thread, out = run_in_thread(do_import)
        await asyncio.to_thread(started.wait, 30)
        assert thread.is_alive()
        stored = await store.append_message(origin=origin(), message=message("zeppelin ride"))
        assert thread.is_alive(), "the import finished before the live write was tested"
        await asyncio.to_thread(thread.join, 120)
        assert not isinstance(out[0], BaseException), out
        hits = await store.search("zeppelin", ME)
        assert [h.session_id for h in hits] == [stored.session_id]
    with SessionDB(path) as db:
        db.check()

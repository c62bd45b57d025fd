"""The background review's per-session counters: moved with a turn's write, kept in state.db."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_core.errors import InvalidMessageError
from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import CounterUpdate, ReviewCounters
from memory_core.sessions.store import SessionStore
from tests.memory_core.sessions.helpers import message, open_db, origin


def test_turns_and_steps_add_up_and_reset_on_writes(tmp_path: Path) -> None:
    with open_db(tmp_path) as db:
        add = CounterUpdate(turns=1, steps=2)
        session = db.append_message(origin=origin(), message=message("hi")).session_id
        db.append_messages(origin=origin(), messages=[message("a", role="assistant")], counters=add)
        db.append_messages(origin=origin(), messages=[message("b", role="assistant")], counters=add)
        assert db.get_counters(session) == ReviewCounters(2, 4)
        wrote_memory = CounterUpdate(turns=0, steps=1, memory_written=True)
        db.append_messages(origin=origin(), messages=[message("c")], counters=wrote_memory)
        assert db.get_counters(session) == ReviewCounters(0, 5)
        wrote_skill = CounterUpdate(turns=1, steps=1, skill_written=True)
        db.append_messages(origin=origin(), messages=[message("d")], counters=wrote_skill)
        assert db.get_counters(session) == ReviewCounters(1, 1)


def test_a_turn_written_twice_counts_once(tmp_path: Path) -> None:
    with open_db(tmp_path) as db:
        step = message("answer", role="assistant", key="turn-1:1")
        for _ in range(2):
            result = db.append_messages(
                origin=origin(), messages=[step], counters=CounterUpdate(turns=1, steps=3)
            )
        assert db.get_counters(result.session_id) == ReviewCounters(1, 3)


def test_a_missing_session_has_no_counters(tmp_path: Path) -> None:
    with open_db(tmp_path) as db:
        assert db.get_counters(12345) is None


def test_negative_increments_are_refused() -> None:
    with pytest.raises(InvalidMessageError):
        CounterUpdate(turns=-1)


def test_a_child_session_carries_its_parents_counters(tmp_path: Path) -> None:
    with open_db(tmp_path) as db:
        parent = db.append_messages(
            origin=origin(), messages=[message("hi")], counters=CounterUpdate(turns=3, steps=7)
        ).session_id
        child = db.start_child_session(parent)
        assert db.get_counters(child) == ReviewCounters(3, 7)


async def test_counters_survive_closing_and_reopening_the_async_store(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    async with SessionStore(path) as store:
        result = await store.append_messages(
            origin=origin(), messages=[message("hi")], counters=CounterUpdate(turns=1, steps=4)
        )
    async with SessionStore(path) as store:
        assert await store.get_counters(result.session_id) == ReviewCounters(1, 4)
    with SessionDB(path) as db:
        assert db.get_counters(result.session_id) == ReviewCounters(1, 4)

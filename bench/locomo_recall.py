"""Recall benchmark on LoCoMo conversations: our search against a plain FTS5 baseline.

Each conversation is imported through the JSON Lines import as one person's
history: each LoCoMo session becomes one session, speaker A speaks as `user`,
speaker B as `assistant`, dated from `session_N_date_time` (turns 30 s apart;
a shared photo's caption is kept in the message as ``[photo: …]``). Every
question of categories 1-4 is asked through `search`, scoped to that person.
A question counts at k when every session holding its evidence is among the k
sessions ranked highest. The baseline is FTS5 `MATCH` of the question's words
joined with OR over a plain `unicode61` index of the same messages, ranked by
`bm25`, sessions ordered by their best message.

    python bench/locomo_recall.py [--data ../shared/data/locomo-dev.json]

The data is CC BY-NC 4.0, for evaluation only: it is read where it lies and
never copied into the repository.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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
        db.conn, question, SearchScope(user), SearchOptions(limit=max(KS)), ranking=ranking
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


def evaluate(samples: list[dict], ranking: Ranking = DEFAULT_RANKING, verbose: bool = True):
    """Recall figures {method: {k: share}} over every question of every sample."""
    totals: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    count = 0
    with tempfile.TemporaryDirectory() as folder, SessionDB(Path(folder) / "state.db") as db:
        for sample in samples:
            db.import_lines(conversation_lines(sample))
        build_baseline(db)
        for sample in samples:
            user = make_user_key("locomo", sample["sample_id"])
            local: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
            asked = questions(sample)
            for question, evidence, _category in asked:
                for name, ranked in (
                    ("search", our_ranking(db, question, user, ranking)),
                    ("baseline", baseline_ranking(db, question, user)),
                ):
                    for k in KS:
                        hit = evidence <= set(ranked[:k])
                        local[name][k] += hit
                        totals[name][k] += hit
            count += len(asked)
            if verbose:
                print(f"{sample['sample_id']}: {len(asked)} questions  " + _line(local, len(asked)))
    return {name: {k: totals[name][k] / max(1, count) for k in KS} for name in totals}, count


def _line(figures: dict[str, dict[int, int]], n: int) -> str:
    return "   ".join(
        f"{name} " + " ".join(f"R@{k} {figures[name][k] / max(1, n):.3f}" for k in KS)
        for name in ("search", "baseline")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    figures, count = evaluate(samples)
    print(f"all: {count} questions (categories 1-4), session-level recall")
    for name in ("search", "baseline"):
        print(f"  {name:9s} " + "  ".join(f"recall@{k} {figures[name][k]:.3f}" for k in KS))


if __name__ == "__main__":
    main()

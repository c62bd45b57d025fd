"""How matching conversations are ranked: each one as a document, and by its best passage,
then chosen to cover the query.

The input is what the backends collect the same way: for each query term, the messages
of the caller's scope that match it (`Hit`: message id, lineage root, time), and the
scope's statistics (`ScopeStats`). A conversation is a lineage (a session and the
sessions compression continued it in). Pure arithmetic on those, so SQLite and
PostgreSQL rank alike.

The rule, in one paragraph. A conversation's score is its BM25 score as one document
plus `passage_weight` times the score of its best passage (Callan, "Passage-level
evidence in document retrieval", SIGIR 1994; the same "document plus max-passage"
combination as Bendersky and Kurland, "Utilizing passage-based language models for
document retrieval", ECIR 2008). Document: Robertson–Spärck Jones BM25 with the
conversation as the document, a term's frequency the number of its messages holding
the term (in chat a word rarely repeats within one message), its length in messages
normalised by the scope's average conversation (``b``), and the inverse document
frequency counted over conversations, not messages; ``k1`` and ``b`` are the usual
1.2 and 0.75, not fitted. Passage: what was said within `passage_seconds` of a matching
message in the same conversation (a few exchanges), scored as the sum of the
inverse frequencies of the distinct terms it holds, counted over messages (the units
passages are made of, as a document's are counted over documents), so terms found
together count more than the same terms scattered. Then the top is chosen greedily to cover the
query (a coverage form of maximal marginal relevance: Carbonell and Goldstein, SIGIR
1998; Santos et al.'s xQuAD, WWW 2010, with the query's terms as its aspects): each next
conversation maximises ``(1 - diversity)`` times its score over the best score plus
``diversity`` times the share of the query's weight it matches that the ones already
chosen do not, so a question whose answer is spread over several conversations gets
them, not five that match the same words. Only `passage_weight` and `diversity` were
fitted, by leave-one-conversation-out on a grid that `bench/locomo_recall.py` prints.
Recency, then the newer conversation, break ties.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass
from operator import itemgetter

Hit = tuple[int, int, float]
"""One matching message: (message id, lineage root id, timestamp)."""

MAX_LIMIT = 100
CANDIDATES_PER_PLACE = 5  # the greedy choice looks at 5 candidates per place asked for
_ROOT = itemgetter(1)


@dataclass(frozen=True)
class Ranking:
    """The constants of the ranking (see the module doc): `k1` and `b` are BM25's usual
    ones; `passage_weight` and `diversity` were fitted by leave-one-conversation-out."""

    k1: float = 1.2
    b: float = 0.75
    passage_weight: float = 0.5
    diversity: float = 0.15
    passage_seconds: float = 120.0


DEFAULT_RANKING = Ranking()


@dataclass(frozen=True)
class ScopeStats:
    """Document statistics of the caller's scope: messages, lineages, candidate lengths."""

    messages: int
    lineages: int
    lengths: dict[int, int]

    @classmethod
    def of(cls, messages: int, lineages: int, lengths: dict[int, int]) -> ScopeStats:
        """The statistics as counted; an empty scope counts as one message in one lineage."""
        return cls(max(1, messages), max(1, lineages), lengths)


@dataclass(frozen=True)
class Scored:
    """The scores of the matching conversations, and what choosing among them needs."""

    scores: dict[int, tuple[float, float]]  # root -> (score, latest match time)
    message_weight: dict[int, float]  # message id -> its terms' weights among messages
    terms_of: dict[int, frozenset[int]]  # root -> indexes of the query terms it matches
    idf: tuple[float, ...]  # per query term


def hit_roots(hits: list[list[Hit]]) -> set[int]:
    """The lineage roots of all the hits."""
    return {root for found in hits for _, root, _ in found}


def score_hits(hits: list[list[Hit]], stats: ScopeStats, ranking: Ranking) -> Scored:
    """Score every conversation with a hit (see the module doc)."""
    # per term, its matching messages per conversation (C-level counting: this runs on
    # every prefetch, over up to max_hits_per_term hits per term)
    tfs = [Counter(map(_ROOT, term_hits)) for term_hits in hits]
    idf = tuple(math.log(1 + (stats.lineages - len(tf) + 0.5) / (len(tf) + 0.5)) for tf in tfs)
    # A passage's (and a snippet's) terms weigh by how rare they are among messages, the
    # units passages are made of.
    rare = tuple(math.log(1 + (stats.messages - len(h) + 0.5) / (len(h) + 0.5)) for h in hits)
    message_weight: dict[int, float] = defaultdict(float)
    placed: dict[int, dict[int, tuple[float, set[int]]]] = defaultdict(dict)
    last: dict[int, float] = {}
    for index, (weight, term_hits) in enumerate(zip(rare, hits, strict=True)):
        for message_id, root, ts in term_hits:
            message_weight[message_id] += weight
            placed[root].setdefault(message_id, (ts, set()))[1].add(index)
            if ts > last.get(root, -math.inf):
                last[root] = ts
    document = _bm25(tfs, idf, stats, ranking)
    scores = {
        root: (
            document[root]
            + ranking.passage_weight * _best_passage(placed[root], rare, ranking.passage_seconds),
            last[root],
        )
        for root in last
    }
    matched: dict[int, set[int]] = defaultdict(set)
    for index, tf in enumerate(tfs):
        for root in tf:
            matched[root].add(index)
    terms_of = {root: frozenset(found) for root, found in matched.items()}
    return Scored(scores, message_weight, terms_of, idf)


def choose_roots(scored: Scored, limit: int, ranking: Ranking = DEFAULT_RANKING) -> list[int]:
    """The best `limit` conversations (at most `MAX_LIMIT`), chosen to cover the query."""
    scores = scored.scores
    order = sorted(scores, key=lambda r: (-scores[r][0], -scores[r][1], -r))
    wanted = min(limit, MAX_LIMIT)
    if ranking.diversity <= 0 or len(order) <= 1:
        return order[:wanted]
    candidates = order[: wanted * CANDIDATES_PER_PLACE]
    best = scores[candidates[0]][0] or 1.0
    total = sum(scored.idf) or 1.0
    covered: set[int] = set()
    chosen: list[int] = []
    while candidates and len(chosen) < wanted:
        gains = [
            (1 - ranking.diversity) * scores[root][0] / best
            + ranking.diversity
            * sum(scored.idf[i] for i in scored.terms_of[root] - covered)
            / total
            for root in candidates
        ]
        pick = candidates.pop(gains.index(max(gains)))  # the first of equals: the better one
        chosen.append(pick)
        covered |= scored.terms_of[pick]
    return chosen


def _bm25(
    tfs: list[Counter[int]], idf: tuple[float, ...], stats: ScopeStats, ranking: Ranking
) -> dict[int, float]:
    k1, b = ranking.k1, ranking.b
    average = stats.messages / stats.lineages
    score: dict[int, float] = defaultdict(float)
    for weight, counts in zip(idf, tfs, strict=True):
        for root, tf in counts.items():
            norm = k1 * (1 - b + b * stats.lengths.get(root, 1) / average)
            score[root] += weight * tf * (k1 + 1) / (tf + norm)
    return score


def _best_passage(
    placed: dict[int, tuple[float, set[int]]], idf: tuple[float, ...], seconds: float
) -> float:
    """The best sum of distinct terms' weights found within `seconds` of a matching
    message (the window starts at it), in one conversation."""
    timeline = sorted(placed.values(), key=itemgetter(0))
    times = [ts for ts, _ in timeline]
    best = 0.0
    for start, (ts, _) in enumerate(timeline):
        end = bisect_right(times, ts + seconds, lo=start)
        terms = set().union(*(found for _, found in timeline[start:end]))
        best = max(best, sum(idf[i] for i in terms))
    return best

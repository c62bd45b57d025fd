"""The ranking rule on hits made by hand: a conversation as a document plus its best
passage, then a top chosen to cover the query."""

from __future__ import annotations

from memory_core.sessions.ranking import (
    Hit,
    Ranking,
    ScopeStats,
    choose_roots,
    score_hits,
)

HOUR = 3600.0


def stats(*roots: int, messages: int = 100) -> ScopeStats:
    return ScopeStats.of(messages, 20, dict.fromkeys(roots, 5))


def test_terms_said_together_outrank_the_same_terms_hours_apart() -> None:
    first_term: list[Hit] = [(1, 1, 0.0), (3, 2, 0.0)]  # said together in 1, apart in 2
    second_term: list[Hit] = [(2, 1, 30.0), (4, 2, 5 * HOUR)]
    hits = [first_term, second_term]
    scored = score_hits(hits, stats(1, 2), Ranking(passage_weight=0.5))
    assert scored.scores[1][0] > scored.scores[2][0]
    flat = score_hits(hits, stats(1, 2), Ranking(passage_weight=0.0))
    assert flat.scores[1][0] == flat.scores[2][0]  # as documents, the two are alike


def test_a_term_found_in_every_conversation_weighs_less_than_a_rare_one() -> None:
    common = [(n, n, 0.0) for n in range(1, 21)]  # in all 20 conversations
    rare = [(100, 1, 0.0)]
    scored = score_hits([common, rare], stats(*range(1, 21)), Ranking())
    assert scored.idf[0] < scored.idf[1]
    assert choose_roots(scored, 1) == [1]


def test_the_top_covers_the_query_before_repeating_it() -> None:
    # 1 and 2 match the same two terms, 3 only the third, and scores lower
    hits = [
        [(1, 1, 0.0), (2, 2, 0.0)],
        [(3, 1, 10.0), (4, 2, 10.0)],
        [(5, 3, 0.0)],
    ]
    scored = score_hits(hits, stats(1, 2, 3), Ranking(passage_weight=0.0, diversity=0.0))
    assert choose_roots(scored, 2, Ranking(diversity=0.0)) == [2, 1]  # newer first on a tie
    assert choose_roots(scored, 2, Ranking(diversity=0.5)) == [2, 3]
    assert set(choose_roots(scored, 3, Ranking(diversity=0.5))) == {1, 2, 3}


def test_the_same_hits_rank_the_same_every_time() -> None:
    hits = [
        [(n, n % 7, float(n)) for n in range(1, 60)],
        [(n, n % 5, float(n)) for n in range(1, 40)],
    ]
    first = choose_roots(score_hits(hits, stats(*range(7)), Ranking()), 5)
    assert first == choose_roots(score_hits(hits, stats(*range(7)), Ranking()), 5)

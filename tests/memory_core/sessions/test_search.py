"""Search: ranking, CJK, fallbacks, lineage, internal sources, time windows, snippets."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_core.scopes import SearchScope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import MATCH_END, MATCH_START, SearchOptions
from memory_core.sessions.snippets import SNIPPET_CHARS
from tests.memory_core.sessions.helpers import message, origin, say

ME = SearchScope("telegram-1")


@pytest.fixture
def db(tmp_path: Path):
    with SessionDB(tmp_path / "state.db") as opened:
        yield opened


def ids(hits) -> list[int]:
    return [h.session_id for h in hits]


def test_a_session_matching_more_query_words_ranks_higher(db: SessionDB) -> None:
    one = say(db, "guitar guitar guitar guitar lessons are fun", ts=1.0)
    both = say(db, "my guitar teacher moved to lisbon", ts=2.0)
    say(db, "lisbon is sunny", ts=3.0)
    hits = db.search("guitar lisbon", ME)
    assert ids(hits)[0] == both and one in ids(hits)
    assert hits[0].score > hits[1].score


def test_a_rare_word_outweighs_a_common_one(db: SessionDB) -> None:
    for i in range(20):
        say(db, f"weather talk number {i}: the weather was grey", ts=float(i))
    rare = say(db, "we found a quokka on the island", ts=0.5)
    assert ids(db.search("weather quokka", ME))[0] == rare


def test_recency_breaks_ties(db: SessionDB) -> None:
    old = say(db, "identical words here", ts=100.0)
    new = say(db, "identical words here", ts=200.0)
    hits = db.search("identical words", ME)
    assert ids(hits) == [new, old]
    assert hits[0].score == hits[1].score


def test_stemming_matches_other_forms(db: SessionDB) -> None:
    sid = say(db, "She painted sunrises all summer")
    hits = db.search("painting sunrise", ME)
    assert ids(hits) == [sid]
    assert f"{MATCH_START}painted{MATCH_END}" in hits[0].snippets[0].text


@pytest.mark.parametrize("query", ["天", "天气", "天气很", "今天天气很好吗"])
def test_cjk_queries_of_any_length(db: SessionDB, query: str) -> None:
    sid = say(db, "今天天气很好，我们去公园")
    say(db, "明日は雨です")
    hits = db.search(query, ME)
    assert ids(hits) == [sid]
    assert MATCH_START in hits[0].snippets[0].text


def test_a_full_cjk_run_ranks_above_a_partial_one(db: SessionDB) -> None:
    partial = say(db, "服务器很慢", ts=2.0)
    full = say(db, "服务器重启了", ts=1.0)
    assert ids(db.search("服务器重启", ME)) == [full, partial]


def test_japanese_and_emoji(db: SessionDB) -> None:
    jp = say(db, "明日は雨です")
    party = say(db, "birthday 🎂🎉 tomorrow")
    assert ids(db.search("雨", ME)) == [jp]
    assert ids(db.search("🎂", ME)) == [party]


def test_unknown_word_falls_back_to_a_prefix(db: SessionDB) -> None:
    sid = say(db, "the kubernetes cluster is down")
    hits = db.search("kube", ME)
    assert ids(hits) == [sid]
    assert f"{MATCH_START}kubernetes{MATCH_END}" in hits[0].snippets[0].text


def test_child_sessions_resolve_to_their_root(db: SessionDB) -> None:
    root = db.append_message(origin=origin(), message=message("start of the saga", 1.0)).session_id
    child = db.start_child_session(root)
    db.append_message(origin=origin(), message=message("saga continues", 2.0))
    hits = db.search("saga", ME)
    assert ids(hits) == [root]
    assert {s.text.count(MATCH_START) for s in hits[0].snippets} == {1}
    assert len(hits[0].snippets) == 2
    assert hits[0].ended_at is None  # the lineage is still open in the child
    other = say(db, "another saga elsewhere", ts=3.0, chat="c2")
    assert ids(db.search("saga", ME, SearchOptions(exclude_lineage_of=child))) == [other]
    assert set(ids(db.search("saga", ME, SearchOptions(exclude_lineage_of=999)))) == {root, other}


def test_the_left_out_conversation_does_not_use_up_the_hit_cap(db: SessionDB) -> None:
    older = say(db, "the boiler leaks again", ts=1.0, chat="c2")
    current = db.append_message(origin=origin(), message=message("boiler news", 10.0)).session_id
    for n in range(8):  # the current conversation holds the newest mentions, more than the cap
        db.append_message(origin=origin(), message=message(f"boiler {n}", 11.0 + n))
    options = SearchOptions(exclude_lineage_of=current, max_hits_per_term=3)
    assert ids(db.search("boiler", ME, options)) == [older]


def test_internal_sources_are_hidden_unless_asked(db: SessionDB) -> None:
    visible = say(db, "tax return notes", source="telegram")
    review = say(db, "tax return review", source="review")
    extraction = say(db, "tax return facts", source="extraction")
    assert ids(db.search("tax", ME)) == [visible]
    assert set(ids(db.search("tax", ME, SearchOptions(include_internal=True)))) == {
        visible,
        review,
        extraction,
    }


def test_time_window(db: SessionDB) -> None:
    early = say(db, "dentist appointment", ts=100.0)
    late = say(db, "dentist again", ts=500.0)
    assert ids(db.search("dentist", ME, SearchOptions(since=400.0))) == [late]
    assert ids(db.search("dentist", ME, SearchOptions(until=400.0))) == [early]
    assert ids(db.search("dentist", ME, SearchOptions(since=100.0, until=100.5))) == [early]
    assert db.search("dentist", ME, SearchOptions(since=600.0)) == []


def test_chat_scope(db: SessionDB) -> None:
    dm = say(db, "budget plan", chat="dm-1")
    group = say(db, "budget plan", chat="group-9", chat_type="group")
    assert set(ids(db.search("budget", ME))) == {dm, group}
    assert ids(db.search("budget", SearchScope("telegram-1", "group-9"))) == [group]
    assert db.search("budget", SearchScope("telegram-1", "nowhere")) == []


def test_hit_fields_and_snippets(db: SessionDB) -> None:
    long_text = "filler words " * 60 + "the secret recipe uses saffron " + "more filler " * 60
    result = db.append_messages(
        origin=origin(),
        messages=[
            message("what about the recipe?", 10.0),
            message(long_text, 11.0, role="assistant"),
            message("recipe saved", 12.0),
            message("one more recipe note", 13.0),
        ],
    )
    hit = db.search("saffron recipe", ME)[0]
    assert (hit.session_id, hit.source, hit.chat_type, hit.started_at) == (
        result.session_id, "telegram", "private", 10.0,
    )  # fmt: skip
    assert hit.external_id is None and hit.ended_at is None
    assert len(hit.snippets) == 3  # at most three per session
    best = hit.snippets[0]
    assert best.message_id == result.message_ids[1] and best.role == "assistant"
    assert best.timestamp == 11.0
    assert f"{MATCH_START}saffron{MATCH_END}" in best.text
    assert best.text.startswith("…") and best.text.endswith("…")
    plain = best.text.replace(MATCH_START, "").replace(MATCH_END, "")
    assert len(plain) <= SNIPPET_CHARS + 2


def test_snippets_per_hit_bounds_the_snippets_not_the_ranking(db: SessionDB) -> None:
    result = db.append_messages(
        origin=origin(),
        messages=[message(f"recipe note {i} with saffron" * (i + 1), float(i)) for i in range(4)],
    )
    other = say(db, "one recipe", ts=9.0, key="other")
    full = db.search("saffron recipe", ME)
    for per_hit in (0, 1, 2):
        hits = db.search("saffron recipe", ME, SearchOptions(snippets_per_hit=per_hit))
        assert ids(hits) == ids(full) == [result.session_id, other]
        assert [h.score for h in hits] == [h.score for h in full]
        assert len(hits[0].snippets) == per_hit
        assert hits[0].snippets == full[0].snippets[:per_hit]  # the best ones, in order


def test_limit_and_empty_queries(db: SessionDB) -> None:
    for i in range(5):
        say(db, f"walk number {i}", ts=float(i))
    assert len(db.search("walk", ME, SearchOptions(limit=3))) == 3
    assert db.search("walk", ME, SearchOptions(limit=0)) == []
    assert db.search("", ME) == []
    assert db.search('"" ** ()', ME) == []
    assert db.search("nothing matches this", ME) == []


def test_hostile_queries_neither_fail_nor_widen(db: SessionDB) -> None:
    say(db, "alpha beta")
    say(db, "other person", user="telegram-2")
    for query in ['alpha" OR "person', "NEAR(alpha", "alpha*", "owner : x", "a" * 10_000, "\x00"]:
        hits = db.search(query, ME)
        assert all(h.chat_id == "telegram-1" for h in hits)
    assert ids(db.search('alpha" OR "person', ME)) == [1]

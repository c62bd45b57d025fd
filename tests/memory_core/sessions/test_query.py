"""Query sanitising: FTS5 syntax in user text can neither break nor widen a search."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.sessions.query import (
    MAX_QUERY_CHARS,
    MAX_TERMS,
    ParsedQuery,
    QueryTerm,
    TermKind,
    cjk_words,
    parse_query,
)


def texts(q: ParsedQuery) -> list[str]:
    return [t.text for t in q.terms]


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE w USING fts5(content, tokenize='porter unicode61')")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(content, tokenize='trigram')")
    rows = [
        "alpha beta",
        "NEAR(alpha beta)",
        "gamma AND delta",
        "not here",
        "star* power",
        "今天天气很好",
        "emoji 😀 party",
    ]
    conn.executemany("INSERT INTO w(content) VALUES (?)", [(r,) for r in rows])
    conn.executemany("INSERT INTO t(content) VALUES (?)", [(r,) for r in rows])
    return conn


def run(conn: sqlite3.Connection, q: ParsedQuery) -> set[int]:
    """Run every term the way search does; a syntax error would raise here."""
    found: set[int] = set()
    for term in q.terms:
        table = "t" if term.kind is TermKind.LITERAL and len(term.text) >= 3 else "w"
        rows = conn.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (term.match_expression(),)
        )
        found.update(r[0] for r in rows)
    return found


def test_words_are_lower_cased_and_stopwords_dropped() -> None:
    assert texts(parse_query("What did Caroline PAINT at the lake?")) == [
        "caroline",
        "paint",
        "lake",
    ]


def test_only_stopwords_are_kept_rather_than_searching_nothing() -> None:
    assert texts(parse_query("what is it")) == ["what", "is", "it"]


def test_quotes_balanced_make_a_phrase_unbalanced_are_dropped() -> None:
    q = parse_query('the "blue whale" song "unfinished')
    assert q.terms[0] == QueryTerm("blue whale", TermKind.PHRASE)
    assert texts(q) == ["blue whale", "song", "unfinished"]
    assert q.terms[0].match_expression() == '"blue whale"'


def test_embedded_double_quote_cannot_escape_the_string() -> None:
    term = QueryTerm('a"b', TermKind.WORD)
    assert term.match_expression() == '"a""b"'


@pytest.mark.parametrize("op", ["AND", "OR", "NOT", "NEAR"])
def test_operators_are_plain_words(fts: sqlite3.Connection, op: str) -> None:
    q = parse_query(f"alpha {op} beta")
    assert all(t.kind is TermKind.WORD for t in q.terms)
    assert all(t.match_expression().startswith('"') for t in q.terms)
    run(fts, q)  # no syntax error


def test_near_group_is_not_an_operator(fts: sqlite3.Connection) -> None:
    q = parse_query("NEAR(alpha beta, 2)")
    assert texts(q) == ["near", "alpha", "beta", "2"]
    assert run(fts, q) == {1, 2}  # the words, wherever they are


def test_star_and_caret_and_column_filters_are_dropped(fts: sqlite3.Connection) -> None:
    q = parse_query("star* ^power content: gamma")
    assert texts(q) == ["star", "power", "content", "gamma"]
    assert all(t.kind is TermKind.WORD for t in q.terms)  # '*' never makes a prefix query
    assert run(fts, q) == {3, 5}


def test_parentheses_and_punctuation(fts: sqlite3.Connection) -> None:
    q = parse_query("((alpha)) OR (beta -gamma) + {delta}")
    assert set(texts(q)) == {"alpha", "beta", "gamma", "delta"}
    run(fts, q)


def test_a_10000_character_query_is_capped(fts: sqlite3.Connection) -> None:
    text = " ".join(f"word{i}" for i in range(2000))[:10_000]
    q = parse_query(text)
    assert 0 < len(q.terms) <= MAX_TERMS
    assert sum(len(t.text) for t in q.terms) <= MAX_QUERY_CHARS
    run(fts, q)


def test_nul_bytes_and_control_characters_are_removed(fts: sqlite3.Connection) -> None:
    q = parse_query("al\x00pha\x07 be\u200bta")
    assert texts(q) == ["al", "pha", "beta"]
    assert all("\x00" not in t.match_expression() for t in q.terms)
    run(fts, q)


def test_emoji_is_a_literal_substring(fts: sqlite3.Connection) -> None:
    q = parse_query("party 😀")
    assert q.terms[1] == QueryTerm("😀", TermKind.LITERAL)
    run(fts, q)


def test_cjk_runs_become_bigram_words_and_one_character_a_prefix() -> None:
    assert parse_query("天气").terms == (QueryTerm("天气", TermKind.WORD),)
    assert parse_query("天").terms == (QueryTerm("天", TermKind.PREFIX),)
    assert parse_query("天").terms[0].match_expression() == '"天"*'
    assert texts(parse_query("天气很好")) == ["天气", "气很", "很好"]
    assert texts(parse_query("誕生日プレゼント")) == [
        "誕生",
        "生日",
        "日プ",
        "プレ",
        "レゼ",
        "ゼン",
        "ント",
    ]
    assert texts(parse_query("생일 선물")) == ["생일", "선물"]


def test_a_quoted_cjk_run_is_one_phrase_of_its_bigrams() -> None:
    assert parse_query('"部署失败"').terms == (QueryTerm("部署 署失 失败", TermKind.PHRASE),)
    # A word after a run: the run's last character is a token in between.
    assert parse_query('"部署 python"').terms == (QueryTerm("部署 署 python", TermKind.PHRASE),)
    assert parse_query('"python 部"').terms == (QueryTerm("python 部", TermKind.PREFIX),)


def test_cjk_words_is_what_the_word_index_holds() -> None:
    assert cjk_words("部署迁移失败") == " 部署 署迁 迁移 移失 失败 败 "
    assert cjk_words("用python部署") == " 用 python 部署 署 "
    assert cjk_words("plain ascii") == "plain ascii"
    assert cjk_words("café 😀") == "café 😀"


def test_a_long_cjk_query_is_capped() -> None:
    assert len(parse_query("我" + "们的会议记录和部署计划" * 10).terms) <= MAX_TERMS


def test_dotted_and_hyphenated_words_are_phrases() -> None:
    assert parse_query("node.js e-mail").terms == (
        QueryTerm("node js", TermKind.PHRASE),
        QueryTerm("e mail", TermKind.PHRASE),
    )


def test_empty_and_punctuation_only_queries_have_no_terms() -> None:
    for text in ("", "   ", '"" ** () ^ :', "\x00\x00"):
        assert not parse_query(text)


def test_prefix_terms_only_come_from_the_fallback() -> None:
    assert QueryTerm("kube", TermKind.WORD).as_prefix().match_expression() == '"kube"*'


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_gives_valid_quoted_terms(text: str) -> None:
    conn = _fresh()
    q = parse_query(text)
    assert len(q.terms) <= MAX_TERMS
    for term in q.terms:
        expression = term.match_expression()
        if term.kind is TermKind.PREFIX:
            expression = expression.removesuffix("*")
        assert expression.startswith('"') and expression.endswith('"')
        assert expression[1:-1].replace('""', "").count('"') == 0
    run(conn, q)  # never an FTS5 syntax error


_CONN: list[sqlite3.Connection] = []


def _fresh() -> sqlite3.Connection:
    if not _CONN:
        conn = sqlite3.connect(":memory:")
        conn.execute("CREATE VIRTUAL TABLE w USING fts5(content, tokenize='porter unicode61')")
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(content, tokenize='trigram')")
        _CONN.append(conn)
    return _CONN[0]

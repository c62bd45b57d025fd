"""The tokens found without the FTS5 table are the table's own, text for text.

`search_text._token_lists` cuts texts into runs in Python and asks the table
only for runs and characters it has not seen; `search_text._tokenize` has the
table read each text whole (what every message went through before). Both
are compared on the texts of tests/data, on the contract corpus of
test_search_tokens, on the LoCoMo conversations of the recall bench when
they lie where the bench reads them, and on every code point of Unicode's
first plane (every fifth of the next two), each in a few positions of a text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from memory_core.pg import search_text
from memory_core.pg.search_text import _token_lists, _tokenize, index_documents, word_tokens
from memory_core.sessions.word_index import about_words, text_words
from tests.memory_core.pg.test_search_tokens import BASE, corpus, rows_with_times

ROOT = Path(__file__).resolve().parents[3]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo-dev.json"


def exact(texts: Sequence[str]) -> list[list[str]]:
    """Each text's tokens as the FTS5 table gives them, reading it whole."""
    out: list[list[str]] = [[] for _ in texts]
    for doc, token, _ in _tokenize(texts):
        out[doc - 1].append(token)
    return out


def strings(value: object) -> Iterator[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def data_texts() -> list[str]:
    texts: list[str] = []
    for path in sorted((ROOT / "tests" / "data").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            texts.extend(strings(json.loads(line)))
    return texts


def assert_same(texts: list[str]) -> None:
    fast = _token_lists(texts)
    want = exact(texts)
    for text, got, expected in zip(texts, fast, want, strict=True):
        assert got == expected, text[:200]
    assert _token_lists(texts) == want  # again, from what was kept


@pytest.fixture(autouse=True)
def forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with nothing known (the classes and runs of earlier tests)."""
    monkeypatch.setattr(search_text._Words, "classes", {})
    monkeypatch.setattr(search_text._Words, "runs", {})
    monkeypatch.setattr(search_text._Words, "others", set())
    monkeypatch.setattr(search_text._Words, "abouts", {})
    monkeypatch.setattr(search_text._Words, "spaces", dict(search_text._Words.spaces))


def test_the_texts_of_tests_data() -> None:
    texts = data_texts()
    assert len(texts) > 1000
    assert_same(texts)


def test_the_contract_corpus_as_indexed() -> None:
    rows = rows_with_times(corpus())
    texts = [text_words(role, content) for role, content, _, _ in rows]
    texts += [about_words(content, ts, name) for _, content, ts, name in rows]
    assert_same([*BASE, *texts])


@pytest.mark.skipif(not LOCOMO.exists(), reason=f"the recall bench's data is not at {LOCOMO}")
def test_the_recall_bench_conversations() -> None:
    texts = list(strings(json.loads(LOCOMO.read_text(encoding="utf-8"))))
    assert len(texts) > 5000
    assert_same(texts)


@pytest.mark.parametrize(("first", "last", "step"), [(1, 0xFFFF, 1), (0x10000, 0x2FFFF, 5)])
def test_every_code_point_in_a_word_at_its_start_and_alone(
    first: int, last: int, step: int
) -> None:
    """Every code point of the first plane and every fifth of the next two (mostly CJK)."""
    chars = [chr(c) for c in range(first, last + 1, step) if not 0xD800 <= c <= 0xDFFF]
    texts = [
        f"q{c}q {c}ab {c} deploy{c} {c}ing {c}ed x{c}{c}y{c}" for c in chars
    ]  # inside, first, alone, after a stem, before a suffix, twice and last
    texts += ["".join(chars[n : n + 97]) for n in range(0, len(chars), 97)]  # runs of them
    assert_same(texts)


def test_a_lone_surrogate_fails_as_before() -> None:
    with pytest.raises(UnicodeEncodeError):
        exact(["bad \ud800 text"])
    with pytest.raises(UnicodeEncodeError):
        _token_lists(["bad \ud800 text"])


def test_a_token_the_stemmer_cuts_mid_character_is_read_with_a_replacement() -> None:
    """FTS5's stemmer works on bytes: stripping "ing" after U+0924 (E0 A4 A4) leaves a
    doubled A4 that its next step halves, a token that is not UTF-8. It is read with
    U+FFFD in its place, the same both ways, never an error that loses the message."""
    tokens = exact(["Deploy\u0924ing"])
    assert tokens == _token_lists(["Deploy\u0924ing"])
    assert any("\ufffd" in token for token in tokens[0])


def test_the_runs_kept_are_forgotten_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_text, "RUN_CACHE", 50)
    texts = [f"word{n} deploying café {n * 7919} 部署 失败" for n in range(400)]
    assert_same(texts)
    assert len(search_text._Words.runs) <= 50


def test_word_tokens_and_documents_do_not_depend_on_what_is_known() -> None:
    rows = rows_with_times(corpus())
    cold = index_documents(rows)
    assert index_documents(rows) == cold  # everything known now
    assert [index_documents([row])[0] for row in rows[::7]] == cold[::7]
    assert word_tokens("Deploying café 部署 e\u0301") == ["deploi", "cafe", "部署", "e"]


def test_known_runs_and_characters_need_no_table(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [*BASE[:30], "Ελληνικά Straße 部署失败 naïve", *data_texts()[:300]]
    texts = [text for text in texts if "\u0301" not in text]  # a diacritic: the table's
    want = exact(texts)
    assert _token_lists(texts) == want  # learned
    monkeypatch.setattr(search_text, "_tokenize", lambda *_a, **_k: pytest.fail("asked"))
    assert _token_lists(texts) == want
    assert word_tokens("deploying naïve deploying") == ["deploi", "naiv", "deploi"]


def test_a_message_the_stemmer_cuts_mid_character_gets_its_words() -> None:
    [words] = index_documents([("user", "the Deploy\u0924ing failed", 1_700_000_000.0, "Ann")])
    assert words is not None and "fail" in words  # stored and found, not refused

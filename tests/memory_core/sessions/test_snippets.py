"""Snippets of hostile and very long messages: bounded, and marking the right words."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core.scopes import SearchScope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import MATCH_END, MATCH_START
from memory_core.sessions.snippets import (
    SCAN_BUDGET,
    SCAN_CHARS,
    SNIPPET_CHARS,
    WINDOW_CHARS,
    WORD_TOKENIZER,
)
from tests.memory_core.sessions.helpers import say
from tests.timing import scaled

ME = SearchScope("telegram-1")
FILLER = "the quick brown fox jumps over a lazy dog and then "


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SessionDB]:
    with SessionDB(tmp_path / "state.db") as opened:
        yield opened


def snippet(db: SessionDB, query: str) -> str:
    hits = db.search(query, ME)
    assert hits, f"no hit for {query!r}"
    return hits[0].snippets[0].text


def marked(text: str) -> list[str]:
    """The marked words of a snippet, in order."""
    return [part.split(MATCH_END)[0] for part in text.split(MATCH_START)[1:]]


def plain(text: str) -> str:
    return text.replace(MATCH_START, "").replace(MATCH_END, "")


def filler(chars: int) -> str:
    return (FILLER * (chars // len(FILLER) + 1))[:chars]


def test_a_nul_before_the_match_does_not_shift_the_mark(db: SessionDB) -> None:
    say(db, "abc\x00 def painting here")
    assert snippet(db, "paint") == f"abc\x00 def {MATCH_START}painting{MATCH_END} here"


def test_sentinel_characters_in_content_do_not_shift_the_mark(db: SessionDB) -> None:
    say(db, "a\x01b\x02c painting here")
    assert snippet(db, "paint") == f"a\x01b\x02c {MATCH_START}painting{MATCH_END} here"


def test_a_word_repeated_80000_times_gives_a_short_correct_snippet(db: SessionDB) -> None:
    say(db, "word " * 80_000)
    text = snippet(db, "word")
    assert text.startswith(f"{MATCH_START}word{MATCH_END} ") and text.endswith("…")
    assert len(plain(text)) <= SNIPPET_CHARS + 1
    assert marked(text) == ["word"] * plain(text).count("word")


def test_a_multi_megabyte_message_gives_a_snippet_quickly(db: SessionDB) -> None:
    # Before the window, highlight() over 8 MB with a match every ten words ran for minutes.
    say(db, (FILLER + "marmot ") * (8_000_000 // (len(FILLER) + 7)))
    result: list[str] = []

    def search() -> None:  # on its own connection, so a slow run never outlives the fixture's
        with SessionDB(db.path) as own:
            result.append(snippet(own, "marmot"))

    worker = threading.Thread(target=search, daemon=True)
    worker.start()
    worker.join(timeout=scaled(20))
    assert not worker.is_alive(), "the snippet of an 8 MB message took over 20 s"
    assert result[0].startswith(FILLER) and result[0].endswith("…")
    assert set(marked(result[0])) == {"marmot"}
    assert len(plain(result[0])) <= SNIPPET_CHARS + 1


def test_a_match_deep_in_a_long_message_is_shown_and_marked(db: SessionDB) -> None:
    say(db, filler(60_000) + " we painted the shed " + filler(60_000))
    text = snippet(db, "painting")
    assert text.startswith("…") and text.endswith("…")
    assert marked(text) == ["painted"] and "the shed" in text


def test_cjk_deep_in_a_long_message_is_marked(db: SessionDB) -> None:
    say(db, filler(50_000) + " 今天天气很好 " + filler(50_000))
    text = snippet(db, "天气")
    assert marked(text) == ["天气"] and text.startswith("…")


def test_a_phrase_across_two_scanned_pieces_is_found(db: SessionDB) -> None:
    piece = WINDOW_CHARS - SNIPPET_CHARS
    for offset in range(-8, 9, 2):  # the phrase starts just before or after a piece boundary
        text = filler(piece + offset) + " node.js rocks " + filler(3 * WINDOW_CHARS)
        session = say(db, text, user=f"u{offset}")
        hits = db.search("node.js", SearchScope(f"u{offset}"))
        assert [h.session_id for h in hits] == [session]
        assert marked(hits[0].snippets[0].text) == ["node.js"], offset


def test_the_word_and_the_literal_that_comes_first_decide_the_window(db: SessionDB) -> None:
    say(db, filler(20_000) + " 天气 " + filler(20_000) + " marmot " + filler(20_000))
    text = snippet(db, "marmot 天气")
    assert marked(text) == ["天气"]


def test_a_match_past_the_scanned_part_shows_the_start_unmarked(db: SessionDB) -> None:
    say(db, filler(SCAN_CHARS + 10_000) + " marmot")
    text = snippet(db, "marmot")
    assert text == filler(SNIPPET_CHARS) + "…"


def test_one_search_scans_long_messages_only_up_to_its_budget(db: SessionDB) -> None:
    deep = SCAN_BUDGET // 5 + 1000  # each match lies this far in: four fit in the budget
    assert deep < SCAN_CHARS
    for n in range(8):
        say(db, filler(deep) + " marmot " + filler(1000), ts=float(n))
    hits = db.search("marmot", ME)
    texts = [h.snippets[0].text for h in hits]
    assert len(texts) == 8
    assert 1 <= sum(marked(t) == ["marmot"] for t in texts) <= 5
    assert all(len(plain(t)) <= SNIPPET_CHARS + 2 for t in texts)


def test_the_snippet_tokenizer_is_the_word_index_tokenizer(db: SessionDB) -> None:
    sql = db.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'messages_fts'").fetchone()
    assert f"tokenize='{WORD_TOKENIZER}'" in sql[0]


def test_cjk_bigram_hits_are_marked_and_adjacent_ones_merged(db: SessionDB) -> None:
    say(db, "昨天部署的时候数据库迁移失败了")
    text = snippet(db, "部署失败")
    assert marked(text) == ["部署", "失败"]  # the words, not the whole run
    say(db, "我女儿的生日是十月三号", user="telegram-2")
    hits = db.search("女儿生日", SearchScope("telegram-2"))
    assert marked(hits[0].snippets[0].text) == ["女儿", "生日"]
    say(db, "数据库迁移失败", user="telegram-3")
    hits = db.search("迁移失败", SearchScope("telegram-3"))
    assert marked(hits[0].snippets[0].text) == ["迁移失败"]  # 迁移 移失 失败: one mark

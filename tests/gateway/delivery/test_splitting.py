"""Cutting long replies: limits in UTF-16 units, boundaries, code fences."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.delivery import split_message, utf16_units
from gateway.delivery.splitting import CLOSE_FENCE, fitting_prefix, held_back, next_cut

LIMIT = 4096


def fences_balanced(part: str) -> bool:
    """Whether every ``` block opened in `part` is closed (a fence line inside a block
    closes it only when it is backticks alone, as in CommonMark)."""
    inside = False
    for line in part.split("\n"):
        stripped = line.strip()
        if stripped.startswith("```") and (not inside or not stripped.strip("`")):
            inside = not inside
    return not inside


def test_units_count_utf16() -> None:
    assert utf16_units("abc") == 3
    assert utf16_units("漢字") == 2
    assert utf16_units("😀") == 2
    assert utf16_units("👍🏽") == 4


def test_blank_and_short_texts() -> None:
    assert split_message("", LIMIT) == []
    assert split_message(" \n\n \t", LIMIT) == []
    assert split_message("  hello  \n", LIMIT) == ["hello"]


def test_4096_emoji_take_two_messages_and_no_pair_is_split() -> None:
    text = "😀" * 4096  # 8,192 UTF-16 units
    parts = split_message(text, LIMIT)
    assert [utf16_units(p) for p in parts] == [4096, 4096]
    assert "".join(parts) == text
    for part in parts:
        part.encode("utf-16-le")  # strict: a lone surrogate would raise


def test_cjk_without_spaces_is_cut_hard_at_the_limit() -> None:
    text = "漢字仮名交じり文" * 1000
    parts = split_message(text, LIMIT)
    assert len(parts) == 2
    assert utf16_units(parts[0]) == LIMIT
    assert "".join(parts) == text


def test_paragraph_before_line_before_word() -> None:
    para = "a" * 3000 + "\n\n" + "b" * 500 + "\n" + "c c " * 300
    assert split_message(para, LIMIT)[0] == "a" * 3000
    line = "a" * 3000 + "\n" + "b b " * 300
    assert split_message(line, LIMIT)[0] == "a" * 3000
    words = "word " * 1000
    parts = split_message(words, LIMIT)
    assert all(part.split(" ") == ["word"] * len(part.split(" ")) for part in parts)
    assert sum(len(part.split(" ")) for part in parts) == 1000


def test_a_paragraph_break_too_early_loses_to_a_later_line_break() -> None:
    text = "intro\n\n" + "x" * 3000 + "\n" + "y" * 2000
    parts = split_message(text, LIMIT)
    assert parts[0] == "intro\n\n" + "x" * 3000


def test_a_paragraph_or_line_that_fits_is_moved_whole_to_the_next_message() -> None:
    para = ("x " * 2046).strip()  # 4,091 units: the part cannot hold it after "intro"
    assert split_message(f"intro\n\n{para}\n\ntail", LIMIT) == ["intro", para, "tail"]
    line = ("y " * 2047).strip()
    assert split_message(f"head\n{line}\nend", LIMIT) == ["head", line, "end"]
    too_long = "intro\n\n" + "z " * 2500  # 5,000 units: cut where it fills the part
    assert split_message(too_long, LIMIT)[0].startswith("intro\n\nz z")


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=1500), min_size=1, max_size=12),
    st.sampled_from(["\n", "\n\n"]),
)
def test_blocks_that_each_fit_are_never_cut(sizes: list[int], separator: str) -> None:
    blocks = [f"{i}. " + "w" * (size - 1) + "\u00a0“a b”" for i, size in enumerate(sizes)]
    parts = split_message(separator.join(blocks), 2000, len)
    assert all(len(p) <= 2000 for p in parts)
    kept = [b for part in parts for b in part.split(separator)]
    assert kept == blocks  # every block whole, in order, in one part


def test_a_word_longer_than_a_message_is_cut_inside() -> None:
    text = "see " + "u" * 5000 + " end"
    parts = split_message(text, LIMIT)
    assert parts[0] == "see"
    assert all(utf16_units(p) <= LIMIT for p in parts)
    assert "".join(parts[1:]).replace(" ", "") == "u" * 5000 + "end"


def test_a_9000_character_reply_with_code_is_three_balanced_parts() -> None:
    prose = "This paragraph explains the deploy script in some detail. " * 20
    code = "\n".join(f"    step_{i} = run('deploy', target={i})  # step {i}" for i in range(110))
    text = f"{prose}\n\n```python\n{code}\n```\n\n{prose}\n\nThat is all."
    text = text + "\n\n" + "Closing words. " * ((9000 - len(text)) // 15)
    assert 8900 <= len(text) <= 9100
    parts = split_message(text, LIMIT)
    assert len(parts) == 3
    assert all(utf16_units(p) <= LIMIT for p in parts)
    assert all(fences_balanced(p) for p in parts)
    reopened = [p for p in parts[1:] if p.startswith("```python\n")]
    assert reopened, "the code block cut by a split is reopened with its language"
    assert parts[0].endswith("\n```")
    # nothing of the code is lost, and its indentation is kept
    body = "".join(parts)
    for i in range(110):
        assert f"    step_{i} = run('deploy', target={i})" in body


def test_a_fence_without_language_reopens_bare() -> None:
    text = "```\n" + "\n".join(f"line {i}" for i in range(100)) + "\n```"
    parts = split_message(text, 300)
    assert len(parts) > 2
    assert all(fences_balanced(p) and utf16_units(p) <= 300 for p in parts)
    assert all(p.startswith("```\n") for p in parts)


def test_crlf_marks_and_flags_are_not_split() -> None:
    accents = "e\u0301" * 3000  # 6,000 units, no spaces
    for part in split_message(accents, LIMIT):
        assert not part.startswith("\u0301")
    flags = "🇺🇸" * 1500  # two regional indicators each, 4 units
    for part in split_message(flags, 4095):
        assert len(part) % 2 == 0 and utf16_units(part) <= 4095
    family = "👨\u200d👩\u200d👧" * 600  # joined by zero-width joiners
    for part in split_message(family, LIMIT):
        assert not part.startswith("\u200d") and not part.endswith("\u200d")
    crlf = ("x" * 100 + "\r\n") * 80
    for part in split_message(crlf, LIMIT):
        assert not part.endswith("\r") and not part.startswith("\n")


ALPHABET = st.sampled_from([*"ab漢字😀 \n", "\r\n", "```py\n", "\n```\n", "e\u0301"])


@settings(max_examples=150, deadline=None)
@given(st.lists(ALPHABET, max_size=400), st.integers(min_value=24, max_value=120))
def test_every_part_fits_and_keeps_fences_balanced(pieces: list[str], limit: int) -> None:
    text = "".join(pieces)
    parts = split_message(text, limit)
    assert all(0 < utf16_units(p) <= limit for p in parts)
    assert all(p == p.strip() or p.startswith("```") for p in parts)
    if "```" not in text:
        squeeze = re.compile(r"\s+")
        assert squeeze.sub("", "".join(parts)) == squeeze.sub("", text)
    else:
        opened = sum(fences_balanced(p) for p in parts)
        assert opened >= len(parts) - 1  # only the last part may end inside a fence


@settings(max_examples=200, deadline=None)
@given(
    st.lists(ALPHABET, min_size=1, max_size=300),
    st.integers(min_value=24, max_value=120),
    st.integers(min_value=0, max_value=120),
)
def test_a_cut_with_a_floor_keeps_what_was_shown_and_else_cuts_as_before(
    pieces: list[str], limit: int, shown_units: int
) -> None:
    rest = "".join(pieces).strip()
    standard = next_cut(rest, None, limit, utf16_units)
    if standard is None:
        assert split_message(rest, limit) == ([rest] if rest else [])
        return
    assert split_message(rest, limit)[0] == standard.part
    # A streamed view shows at most the limit less the room to close a fence.
    room = limit - utf16_units(CLOSE_FENCE)
    floor = len(held_back(rest[: fitting_prefix(rest, min(shown_units, room), utf16_units)]))
    floored = next_cut(rest, None, limit, utf16_units, floor)
    assert floored is not None and utf16_units(floored.part) <= limit
    assert floored.part.startswith(rest[:floor]), "the shown text stays in its part"
    if standard.end >= floor:
        assert floored == standard
    remainder = floored.remainder(rest)
    whole = re.compile(r"\s+|```\w*")
    # (joined at a line break: a closing fence right before a word would swallow it)
    assert whole.sub("", floored.part + "\n" + remainder) == whole.sub("", rest)

"""The §-delimited entry format."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memory_core.errors import InvalidEntryError
from memory_core.file_memory.entries import (
    DELIMITER,
    file_text,
    is_canonical,
    join_entries,
    normalise_entry,
    parse_entries,
    usage,
)


def test_parse_splits_strips_and_drops_empties_and_duplicates() -> None:
    text = "  first \n§\n\n§\nsecond\nline two\n§\nfirst\n§\n   \n"
    assert parse_entries(text) == ["first", "second\nline two"]


def test_section_sign_inside_a_line_survives() -> None:
    entries = ["Studies § 242 BGB", "a §\nb", "§ at start"]
    assert parse_entries(file_text(entries)) == entries


def test_empty_file_and_empty_list() -> None:
    assert parse_entries("") == []
    assert file_text([]) == ""
    assert usage([]) == 0


def test_file_text_ends_with_one_newline_and_usage_is_the_joined_length() -> None:
    assert file_text(["a", "bc"]) == "a\n§\nbc\n"
    assert usage(["a", "bc"]) == len("a\n§\nbc") == 6


@pytest.mark.parametrize("content", ["", "   ", "\n\t\n", "\r\n"])
def test_empty_content_is_refused(content: str) -> None:
    with pytest.raises(InvalidEntryError, match="empty"):
        normalise_entry(content)


@pytest.mark.parametrize("content", ["a\n§\nb", "a\n§", "§\nb", "§", "a\n  §  \nb"])
def test_a_line_holding_only_the_section_sign_is_refused(content: str) -> None:
    with pytest.raises(InvalidEntryError, match="separates entries"):
        normalise_entry(content)


def test_lone_surrogates_are_refused() -> None:
    with pytest.raises(
        InvalidEntryError, match=r"not valid Unicode \(code point U\+D800 at offset 2\)"
    ):
        normalise_entry("ab\ud800cd")


def test_normalise_strips_and_unifies_line_endings() -> None:
    assert normalise_entry("  one\r\ntwo\rthree  ") == "one\ntwo\nthree"


def test_is_canonical_allows_whitespace_around_the_file_only() -> None:
    assert is_canonical("a\n§\nb\n")
    assert is_canonical("\n\na\n§\nb")
    assert not is_canonical("a \n§\nb")  # space around an entry
    assert not is_canonical("a\n§\na")  # a duplicate
    assert not is_canonical("a\n§\n\n§\nb")  # an empty entry


def _is_valid(entry: str) -> bool:
    try:
        return normalise_entry(entry) == entry
    except InvalidEntryError:
        return False


_ALPHABET = st.sampled_from(["a", "b", " ", "\n", "§", "\t", "é", "😀", "\r", "\u00a0"])
valid_entries = st.text(alphabet=_ALPHABET, min_size=1, max_size=25).filter(_is_valid)


@settings(max_examples=200, deadline=None)
@given(st.lists(valid_entries, unique=True, max_size=8))
def test_any_list_of_valid_entries_round_trips(entries: list[str]) -> None:
    text = file_text(entries)
    assert parse_entries(text) == entries
    assert is_canonical(text)
    assert usage(entries) == len(join_entries(entries))


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=60))
@example("a\n§ \n§\nb")  # reads as ["a\n§", "b"], which would re-join as something else
def test_a_canonical_text_reads_back_stably_and_others_are_flagged(text: str) -> None:
    entries = parse_entries(text)
    assert len(set(entries)) == len(entries)
    assert all(e and e == e.strip() for e in entries)
    stable = parse_entries(DELIMITER.join(entries)) == entries
    if is_canonical(text):
        assert stable

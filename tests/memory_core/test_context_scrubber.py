"""The streaming scrubber: spans removed whatever the chunk boundaries."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.context import LONGEST_TAG, StreamingContextScrubber, scrub_context


def _stream(chunks: list[str]) -> str:
    scrubber = StreamingContextScrubber()
    return "".join(scrubber.feed(c) for c in chunks) + scrubber.flush()


# -- the non-streaming oracle ------------------------------------------------


def test_scrub_removes_spans_in_any_case() -> None:
    text = "A<memory-context>secret</memory-context>B<MEMORY-Context>x</Memory-CONTEXT>C"
    assert scrub_context(text) == "ABC"


def test_scrub_drops_an_unclosed_span_to_the_end() -> None:
    assert scrub_context("visible <memory-context>\nrecalled facts...") == "visible "


def test_scrub_removes_a_stray_closing_tag_and_keeps_near_misses() -> None:
    assert scrub_context("a</memory-context>b") == "ab"
    near = "<memory-con <mem <memory-contexts> </memory context> <memory_context>"
    assert scrub_context(near) == near


def test_scrub_ends_a_span_at_the_first_close_even_after_a_nested_open() -> None:
    text = "a<memory-context>x<memory-context>y</memory-context>b</memory-context>c"
    assert scrub_context(text) == "abc"


# -- streaming examples --------------------------------------------------------


def test_tags_split_across_chunks() -> None:
    chunks = [
        "Hello <mem",
        "ory-con",
        "text>\n[System note",
        ": …]\nsecret\n</memo",
        "ry-context>!",
    ]
    assert _stream(chunks) == "Hello !"


def test_one_character_at_a_time() -> None:
    text = "a<Memory-Context>s</memory-context>b<memory-context>t</MEMORY-CONTEXT>c"
    assert _stream(list(text)) == "abc"


def test_a_false_start_is_released_as_soon_as_it_cannot_be_a_tag() -> None:
    scrubber = StreamingContextScrubber()
    assert scrubber.feed("x <mem") == "x "
    assert scrubber.feed("o") == ""  # "<memo" may still become "<memory-context>"
    assert scrubber.feed("x") == "<memox"  # ... but "<memox" cannot
    assert scrubber.feed(" lane") == " lane"
    assert scrubber.feed(" a<") == " a"
    assert scrubber.feed("b") == "<b"
    assert scrubber.flush() == ""


def test_held_text_is_released_at_flush_outside_a_span() -> None:
    scrubber = StreamingContextScrubber()
    assert scrubber.feed("ends with <memory-con") == "ends with "
    assert scrubber.flush() == "<memory-con"


def test_an_unclosed_span_is_dropped_at_flush() -> None:
    scrubber = StreamingContextScrubber()
    assert scrubber.feed("ok <memory-context> secret") == "ok "
    assert scrubber.inside_span
    assert scrubber.feed(" more secret </memory-con") == ""
    assert scrubber.flush() == ""
    assert not scrubber.inside_span


def test_nothing_inside_a_span_is_shown_before_it_closes() -> None:
    scrubber = StreamingContextScrubber()
    shown = [scrubber.feed(c) for c in ["<memory-context>", "s1", "s2", "</memory-context>", "z"]]
    assert shown == ["", "", "", "", "z"]


# -- the property test ------------------------------------------------------------

_TAG_CASES = st.sampled_from(["<memory-context>", "</memory-context>"]).flatmap(
    lambda tag: st.lists(st.booleans(), min_size=len(tag), max_size=len(tag)).map(
        lambda ups: "".join(c.upper() if up else c for c, up in zip(tag, ups, strict=True))
    )
)
_NEAR_MISSES = st.sampled_from(
    [
        "<",
        "</",
        "<m",
        "<mem",
        "<memory-con",
        "<MEMORY-CONTEX",
        "</memory-",
        "<memory-context",
        "</memory-context",
        "memory-context>",
        "<memory context>",
        "<<memory-context>",
    ]
)
_PLAIN = st.text(alphabet="abc <>/-\nmeoryMEORY", max_size=12)
_SECRET = st.text(alphabet="ZQ<>/-", min_size=1, max_size=6)  # only ever inside spans


@st.composite
def _texts(draw: st.DrawFn) -> tuple[str, bool]:
    """A text of plain pieces, near misses and spans; True if every span closes."""
    parts: list[str] = []
    closed = True
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["plain", "near", "span", "tag"]))
        if kind == "plain":
            parts.append(draw(_PLAIN).replace("Z", "").replace("Q", ""))
        elif kind == "near":
            parts.append(draw(_NEAR_MISSES))
        elif kind == "tag":
            parts.append(draw(_TAG_CASES))
        else:
            opening = draw(_TAG_CASES.filter(lambda t: "/" not in t))
            closing = draw(_TAG_CASES.filter(lambda t: "/" in t))
            closed = draw(st.booleans())
            parts.append(opening + draw(_SECRET) + (closing if closed else ""))
            if not closed:
                break  # an unclosed span swallows the rest anyway
    return "".join(parts), closed


@st.composite
def _split(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=max(1, len(text)))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_streaming_equals_the_whole_text_scrub_at_any_boundaries(data: st.DataObject) -> None:
    text, _ = data.draw(_texts())
    chunks = data.draw(_split(text))
    assert "".join(chunks) == text

    scrubber = StreamingContextScrubber()
    shown = ""
    fed = ""
    for chunk in chunks:
        shown += scrubber.feed(chunk)
        fed += chunk
        expected_so_far = scrub_context(fed)
        # what is shown is always a prefix of the final output
        assert scrub_context(text).startswith(shown)
        if not scrubber.inside_span:
            # outside a span, the only thing not yet shown is a short held tail
            assert expected_so_far.startswith(shown)
            assert len(expected_so_far) - len(shown) < LONGEST_TAG
    shown += scrubber.flush()
    assert shown == scrub_context(text)
    assert "Z" not in shown and "Q" not in shown  # span contents never leak

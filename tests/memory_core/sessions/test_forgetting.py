"""`Needles`: a forgotten text found however a store holds it, and nothing else touched."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from memory_core.sessions import FORGOTTEN
from memory_core.sessions.forgetting import Needles

texts = st.text(min_size=1, max_size=30).filter(lambda t: t.strip() != "")


def tool_call(content: str, *, ascii_args: bool, ascii_list: bool) -> str:
    arguments = json.dumps({"content": content}, ensure_ascii=ascii_args)
    return json.dumps([{"function": {"arguments": arguments}}], ensure_ascii=ascii_list)


def test_a_text_is_found_as_written_escaped_and_in_any_case() -> None:
    needles = Needles(['Mi perro se llama "Galleta" — 饼干'])
    said = 'ayer: MI PERRO SE LLAMA "GALLETA" — 饼干!'
    assert needles.scrub(said) == f"ayer: {FORGOTTEN}!"
    assert needles.scrub("nothing here") == "nothing here"
    assert needles.scrub(None) is None


@given(
    text=texts,
    before=st.text(max_size=10),
    ascii_args=st.booleans(),
    ascii_list=st.booleans(),
)
def test_no_stored_form_of_a_text_survives_and_json_stays_json(
    text: str, before: str, ascii_args: bool, ascii_list: bool
) -> None:
    needles = Needles([text])
    stored = tool_call(before + text, ascii_args=ascii_args, ascii_list=ascii_list)
    scrubbed = needles.scrub(stored)
    assert scrubbed is not None and not needles.holds(scrubbed)
    arguments = json.loads(json.loads(scrubbed)[0]["function"]["arguments"])
    assert FORGOTTEN in arguments["content"]
    assert needles.scrub(scrubbed) == scrubbed  # forgetting twice changes nothing


@given(text=texts, other=st.text(max_size=40))
def test_text_without_it_is_left_as_it_is(text: str, other: str) -> None:
    needles = Needles([text])
    if not needles.holds(other):
        assert needles.scrub(other) == other
    assert needles.holds(other) == (needles.scrub(other) != other)


def test_blank_texts_forget_nothing() -> None:
    needles = Needles(["", " \n"])
    assert not needles
    assert needles.scrub("any words") == "any words"


def test_the_marker_is_never_matched_again() -> None:
    needles = Needles(["forgotten", "[forgotten]"])
    assert needles.scrub(f"was {FORGOTTEN} and forgotten") == f"was {FORGOTTEN} and {FORGOTTEN}"

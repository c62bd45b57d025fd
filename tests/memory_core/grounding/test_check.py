"""The check: all of an entry's words in one message of the person's or two consecutive
ones, stated of themselves; its evidence, its closest message and its reason."""

from __future__ import annotations

import random

import pytest

from memory_core import Evidence, OwnWords, Said, check
from memory_core.file_memory.origin import EVIDENCE_SPAN_CHARS

LONG_SESSION = 500


def test_a_grounded_entry_keeps_the_message_and_the_clause_that_said_it() -> None:
    said = OwnWords([Said(41, "hi there"), Said(42, "Long day. I live in Lisbon, not Porto!")])
    support = check("Lives in Lisbon", said)
    assert support.supported and support.verdict == "grounded"
    assert support.evidence == (Evidence(42, "I live in Lisbon"),)
    assert support.closest is None and support.missing == ()


def test_a_plain_string_gets_its_position_as_its_id() -> None:
    support = check("Owns a kayak", OwnWords(["hello", "I own a kayak"]))
    assert support.evidence == (Evidence(1, "I own a kayak"),)


def test_two_consecutive_messages_ground_an_entry_two_apart_do_not() -> None:
    beagle, biscuit = Said(7, "I just adopted a beagle"), Said(9, "named him Biscuit")
    support = check("Adopted a beagle named Biscuit", OwnWords([beagle, biscuit]))
    assert support.evidence == (
        Evidence(7, "I just adopted a beagle"),
        Evidence(9, "named him Biscuit"),
    )
    apart = OwnWords([beagle, Said(8, "what's for dinner?"), biscuit])
    refused = check("Adopted a beagle named Biscuit", apart)
    assert refused.verdict == "not_said" and refused.apart == ("biscuit",)
    assert refused.closest == Evidence(7, "I just adopted a beagle")
    assert "'biscuit' in the same message as the rest" in refused.reason()


def test_each_refusal_says_why_and_shows_the_closest_message() -> None:
    said = OwnWords(
        [
            Said(1, "I do not live in Zanzibar"),
            Said(2, "guess which city I work in"),
            Said(3, "my sister is allergic to nuts"),
        ]
    )
    opposite = check("User lives in Zanzibar.", said)
    assert opposite.verdict == "opposite"
    assert opposite.closest == Evidence(1, "I do not live in Zanzibar")
    assert opposite.reason() == "the person said the opposite ('I do not live in Zanzibar')"
    asked = check("Works in a city", said)
    assert asked.verdict == "asked" and asked.closest is not None
    assert asked.reason().startswith("the person asked, they did not say it")
    other = check("Is allergic to nuts", said)
    assert other.verdict == "someone_else"
    assert other.reason().startswith("the person said it of someone else")
    unsaid = check("Is allergic to penicillin", said)
    assert unsaid.verdict == "not_said" and unsaid.missing == ("penicillin",)
    assert unsaid.reason() == "the person never said 'penicillin'"
    assert unsaid.closest == Evidence(3, "my sister is allergic to nuts")


def test_an_entry_without_words_of_its_own_is_not_grounded() -> None:
    support = check("Is ok", OwnWords(["I'm ok"]))
    assert support.verdict == "no_words" and not support.supported
    assert "no word of its own" in support.reason()


def test_nothing_said_at_all_refuses_with_no_closest_message() -> None:
    support = check("Lives in Berlin", OwnWords([]))
    assert support.verdict == "not_said" and support.closest is None
    assert support.missing == ("lives", "berlin")


def test_a_long_span_is_cut_at_a_word_boundary() -> None:
    filler = " ".join(["really"] * 60)
    text = f"I live in Berlin {filler} nice"
    [evidence] = check("Lives in Berlin", OwnWords([text])).evidence
    assert len(evidence.span) <= EVIDENCE_SPAN_CHARS
    assert evidence.span.startswith("I live in Berlin really") and evidence.span.endswith("y…")


def test_the_entry_polarity_must_match_the_clause() -> None:
    said = OwnWords(["I don't eat meat", "ich wohne nicht mehr in Köln", "我不吃香菜"])
    assert check("Does not eat meat", said).supported
    assert check("Eats meat", said).verdict == "opposite"
    assert check("Wohnt nicht mehr in Köln", said).supported
    assert check("Wohnt in Köln", said).verdict == "opposite"
    assert check("用户不吃香菜", said).supported
    assert check("用户吃香菜", said).verdict == "opposite"


def test_a_third_party_the_entry_names_is_fine() -> None:
    said = OwnWords(["my sister is allergic to nuts, she carries an EpiPen"])
    assert check("User's sister is allergic to nuts", said).supported
    assert check("User's sister carries an EpiPen", said).supported
    assert check("Carries an EpiPen", said).verdict == "someone_else"


def test_a_long_session_grounds_from_the_one_message_that_says_it() -> None:
    """Correctness over 500 messages; its speed is measured by bench/safety_scan.py."""
    rng = random.Random(34)
    vocabulary = ["coffee", "tea", "dog", "cat", "Berlin", "Lisbon", "nurse", "piano", "garden"]
    texts = []
    for n in range(LONG_SESSION):
        a, b, c, d = rng.sample(vocabulary, 4)
        texts.append(f"my friend likes {a}, but I don't {b}? I love {c} and {d} #{n}")
    texts.append("I play the cello on Sundays")
    said = OwnWords(Said(n, t) for n, t in enumerate(texts))
    assert not check("Owns a boat", said).supported
    assert check("Plays the cello on Sundays", said).evidence == (
        Evidence(LONG_SESSION, "I play the cello on Sundays"),
    )


def test_the_persons_own_name_needs_no_grounding_anyone_elses_does() -> None:
    said = OwnWords(["I keep bees"], names=["Alice Smith"])
    assert check("Alice keeps bees", said).supported
    assert check("Alice Smith keeps bees", said).supported
    assert not check("Bob keeps bees", said).supported
    assert not check("Alice keeps bees", OwnWords(["I keep bees"])).supported
    assert not check("Name: Alice", said).supported  # her name alone is what it says
    assert check("Name: Alice", OwnWords(["call me Alice"], names=["Alice"])).supported


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("User likes cats.", "I hate cats"),
        ("User prefers Python.", "Python is terrible"),
        ("User enjoys running.", "running hurts my knees"),
    ],
)
def test_the_verb_of_what_they_feel_must_be_theirs(entry: str, said: str) -> None:
    assert not check(entry, OwnWords([said])).supported


def test_a_display_name_grounds_only_the_subject_it_names() -> None:
    said = OwnWords(["I work in Paris"], names=["Rose Baker"])
    assert not check("User works as a baker in Paris.", said).supported
    assert check("Rose works in Paris", said).supported

"""The person's own words as the grounding check gets them (`said_texts`): their own
messages only, each with its stored id, a voice note's transcript as their words, a
picture's description not. The check itself is tested in tests/memory_core/grounding.
"""

from __future__ import annotations

from gateway.jobs.support import said_texts
from gateway.media import NOT_SHOWN_MARK, image_line, spoken_text
from memory_core import Evidence, OwnWords, Said, StoredMessage, check


def stored(n: int, role: str, content: str, *, own: bool = True) -> StoredMessage:
    return StoredMessage(n, 1, role, content, float(n), None, None, None, None, None, own)


def test_only_the_persons_own_messages_in_order_with_their_ids() -> None:
    messages = [
        stored(10, "user", "guess which city I live in"),
        stored(11, "assistant", "Zanzibar?"),
        stored(12, "user", "remember that I live in Atlantis", own=False),  # forwarded
        stored(13, "tool", "{}"),
        stored(14, "user", "I live in Lisbon"),
    ]
    assert said_texts(messages) == [
        Said(10, "guess which city I live in"),
        Said(14, "I live in Lisbon"),
    ]
    said = OwnWords(said_texts(messages))
    assert check("Lives in Zanzibar", said).verdict == "not_said"
    assert check("Lives in Atlantis", said).verdict == "not_said"
    assert check("Lives in Lisbon", said).evidence == (Evidence(14, "I live in Lisbon"),)


def test_a_transcript_is_the_persons_words_without_its_marker() -> None:
    [said] = said_texts([stored(3, "user", spoken_text("I play the cello in an orchestra"))])
    assert said == Said(3, "I play the cello in an orchestra")
    words = OwnWords([said])
    assert check("Plays the cello in an orchestra", words).supported
    verdict = check("Sends voice notes", words)
    assert not verdict.supported and set(verdict.missing) == {"sends", "voice", "notes"}


def test_a_pictures_description_is_not_the_persons_words() -> None:
    dog = "look who I met today\n" + image_line("a golden retriever puppy asleep on a sofa")
    bike = f"my new bike\n{NOT_SHOWN_MARK}"
    said = said_texts([stored(1, "user", dog), stored(2, "user", bike)])
    assert said == [Said(1, "look who I met today"), Said(2, "my new bike")]
    verdict = check("Has a golden retriever puppy", OwnWords(said))
    assert not verdict.supported
    assert {"golden", "retriever", "puppy"} <= set(verdict.missing)
    assert check("Has a new bike", OwnWords(said)).supported
    assert not check("Attached an image", OwnWords(said)).supported

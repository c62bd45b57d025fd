"""Origins, history and undo seen from a real `mnemo chat` with the scripted fake model.

The person tells the bot two things; the turn's memory tool saves one (hers) and
the background review the other (learned): `/memory` shows who wrote each; she
forgets hers, which `/memory history` shows only as forgotten and `/memory undo`
cannot bring back, and `/memory undo` takes away the one the review added.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.gateway.test_background_e2e import (  # noqa: F401  (fixtures)
    chat_factory,
    memory_call,
    model,
)

FIRST = "I'm Ada. I play the cello in an orchestra."
SECOND = "Please remember that I keep bees on a rooftop in Lyon."
LEARNED = "play the cello in an orchestra"
HERS = "Keeps bees on a rooftop in Lyon"
SCRIPT = [
    {"text": "Hello Ada!"},
    memory_call(LEARNED),  # the review after the first reply
    {"text": "Saved."},
    memory_call(HERS),  # the second turn's own memory call
    {"text": "Noted, Ada."},
]


@pytest.mark.slow  # two real processes, start to exit
@pytest.mark.parametrize("model", [SCRIPT], indirect=True)
def test_memory_shows_origins_forget_is_for_good_and_undo_removes(chat_factory: Any) -> None:  # noqa: F811
    chat = chat_factory("memory: {nudge_interval: 1, notifications: verbose}\n")
    chat.type(FIRST)
    chat.read_until(f"➕ {LEARNED}")  # the review's write is on disk
    chat.type(SECOND)
    chat.read_until("Noted, Ada.")

    chat.type("/memory")
    end = chat.read_until("Send /forget")
    listing = "\n".join(chat.lines[end - 3 : end])
    assert f"1. {LEARNED} (learned in the background (review), " in listing
    assert f"2. {HERS} (you, " in listing

    chat.type("/forget 2")
    chat.read_until(f"Forgotten: {HERS}")
    assert HERS not in chat.profile()

    chat.type("/memory history")
    end = chat.read_until("Send /memory undo")
    history = chat.lines[end - 3 : end]
    assert history[0].startswith("#3 ") and history[0].endswith("forgot an entry for good (you)")
    assert history[1].startswith("#2 ") and "an entry since forgotten (you)" in history[1]
    assert f"added “{LEARNED}” (learned in the background (review))" in history[2]

    chat.type("/memory undo 2")  # her entry: forgotten for good
    chat.read_until("Change 2 can't be undone: it was about an entry you asked me to forget")
    chat.type("/memory undo")  # the latest it may: the review's add, gone
    chat.read_until(f"Undone #1: removed “{LEARNED}”.")
    chat.type("/memory")
    chat.read_until("I don't remember anything about you yet.")
    chat.quit()
    assert LEARNED not in chat.profile() and HERS not in chat.profile()

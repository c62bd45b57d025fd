"""A full USER.md makes room by archiving, seen from a real `mnemo chat`.

With a small ``memory.user_char_limit`` the person's own entry (her turn's memory call)
and two entries the background review learned fill her USER.md. The next review add
does not fail: the oldest entry the review wrote moves to her archive, and the new one
is written beside hers. `/memory archive` lists the moved entry; `/memory undo` of the
archive is refused while there is no room (nothing changes), and once the newest add
is undone, `/memory undo` brings the moved entry back. Another person, Bob, on the same
data directory, sees nothing of hers in his archive or history.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.gateway.processes import run_mnemo
from tests.gateway.test_background_e2e import (  # noqa: F401  (fixtures)
    chat_factory,
    memory_call,
    model,
)

HERS = "Keeps bees on a rooftop in Lyon"
CELLO = "Plays the cello in an orchestra"  # the review's first: the oldest, it moves
TOMATOES = "Grows tomatoes on a balcony"
MARATHONS = "Runs marathons each spring"
SCRIPT = [
    memory_call(HERS),  # her first turn's own memory call
    {"text": "Noted, Ada."},  # (no review after it: the turn wrote memory)
    {"text": "Lovely."},
    memory_call(CELLO),  # the review after the second reply
    {"text": "Saved."},
    {"text": "Nice."},
    memory_call(TOMATOES),
    {"text": "Saved."},
    {"text": "Great."},
    memory_call(MARATHONS),  # the fourth review: USER.md is full
    {"text": "Saved."},
]
# 31 + 3 + 31 + 3 + 27 = 95 characters fit in 100; the marathons' 3 + 26 do not
CONFIG = "memory: {nudge_interval: 1, notifications: verbose, user_char_limit: 100}\n"


@pytest.mark.slow  # three real processes, start to exit
@pytest.mark.parametrize("model", [SCRIPT], indirect=True)
def test_a_full_user_md_archives_the_oldest_learned_entry_and_undo_brings_it_back(
    chat_factory: Any,  # noqa: F811
) -> None:
    chat = chat_factory(CONFIG)
    chat.type("Please remember that I keep bees on a rooftop in Lyon.")
    chat.read_until("Noted, Ada.")
    chat.type("I play the cello in an orchestra.")
    chat.read_until(f"➕ {CELLO}")  # each review's write is on disk before the next line
    chat.type("I grow tomatoes on my balcony.")
    chat.read_until(f"➕ {TOMATOES}")
    assert len(chat.profile().rstrip("\n")) == 95

    chat.type("I run marathons every spring.")
    chat.read_until(f"➕ {MARATHONS}")
    profile = chat.profile()
    assert HERS in profile and TOMATOES in profile and MARATHONS in profile
    assert CELLO not in profile  # moved, not refused

    chat.type("/memory archive")
    end = chat.read_until("brings it back)")
    assert chat.lines[end - 1] == f"- {CELLO}"
    assert "(learned in the background (review); archived " in chat.lines[end]
    found = re.search(r"/memory undo (\d+) brings it back", chat.lines[end])
    assert found is not None
    moved = int(found[1])

    chat.type(f"/memory undo {moved}")  # no room for it yet: refused, nothing changes
    refused = chat.lines[chat.read_until(f"Change {moved} can't be undone")]
    assert refused == (
        f"Change {moved} can't be undone: it no longer fits (the memory would be at 124/100 "
        "characters); remove an entry first."
    )
    assert chat.profile() == profile

    chat.type("/memory undo")  # the latest change in force: the marathons' add
    chat.read_until(f"removed “{MARATHONS}”.")
    chat.type("/memory undo")  # then the archiving: the cello is back
    chat.read_until(f"Undone #{moved}: brought back “{CELLO}”.")
    chat.type("/memory archive")
    chat.read_until("Nothing of yours was moved to the archive.")
    chat.quit()
    profile = chat.profile()
    assert CELLO in profile and HERS in profile and TOMATOES in profile
    assert MARATHONS not in profile

    bob = run_mnemo(
        "chat",
        "/memory archive\n/memory history\n/quit\n",
        home=chat.home,
        cwd=chat.home.parent,
        user="bob",
    )
    assert bob.returncode == 0, bob.stderr
    assert "Nothing of yours was moved to the archive." in bob.stdout
    for hers in (HERS, CELLO, TOMATOES, MARATHONS):
        assert hers not in bob.stdout

"""`mnemo run` on Telegram with ``memory.write_approval: off``: what reads as an
instruction is staged anyway.

The real `mnemo` script talks through python-telegram-bot to the fake Bot API and to the
fake model, which scripts each reply and each review. Alice's own turn saves her blog's
link, and the review after her next message saves an order she gave ("from now on
always ..."): neither reaches her USER.md. `/memory pending` lists both with the reasons
`instruction_reasons` gives; approving the link writes it, and the order keeps waiting.
Bob sees nothing of hers, and his `/memory approve` of her change's number changes
nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from memory_core import instruction_reasons
from tests.fakes.openai import ToolCall
from tests.gateway.e2e_support import NOTHING_WAITING as NOTHING
from tests.gateway.e2e_support import WAITING, fakes_fixture, learning_section
from tests.gateway.test_telegram_e2e import ALICE, BOB, Fakes, Mnemo, start_mnemo

pytestmark = pytest.mark.slow  # a mnemo run of its own

LINK = "Blog at https://alice.example/blog"
ORDER = "From now on always answer in French"

fakes = fakes_fixture(Fakes, scope="function")


def start(fakes: Fakes, workdir: Path) -> Mnemo:
    """`mnemo run` with a review after every reply and approval off."""
    learning = learning_section(nudge=1, creation_nudge=0, write_approval='"off"')
    return start_mnemo(fakes, workdir, grace=5, learning=learning)


def user_md(home: Path, user_id: int) -> str:
    path = home / "memories" / "users" / f"telegram-{user_id}" / "USER.md"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def memory_add(content: str) -> ToolCall:
    return ToolCall("memory", {"target": "user", "action": "add", "content": content})


def asks(fakes: Fakes, user_id: int, line: str, answer: str) -> str:
    """`user_id` sends `line` in their private chat; the bot's reply holding `answer`."""
    seen = len(fakes.bot_messages(user_id))
    fakes.command(user_id, user_id, line)
    return fakes.reply(user_id, seen, answer)


def listed(listing: str, text: str) -> tuple[int, str]:
    """The number and line of `/memory pending`'s entry naming `text`."""
    [line] = [line for line in listing.splitlines() if text in line]
    found = re.match(r"\s*(\d+)\. ", line)
    assert found is not None, listing
    return int(found[1]), line


def requests_past(fakes: Fakes, count: int) -> Callable[[], bool]:
    return lambda: len(fakes.model.requests) >= count


def test_a_link_of_her_turn_and_an_order_of_a_review_wait_for_alice_with_their_reasons(
    fakes: Fakes, tmp_path: Path
) -> None:
    mnemo = start(fakes, tmp_path / "bot")
    try:
        fakes.call(fakes.model.call_tools, memory_add(LINK))  # her turn's own call
        fakes.call(fakes.model.say, "I'll keep it once you approve.")
        fakes.text(ALICE, ALICE, "My blog is at https://alice.example/blog, remember it")
        fakes.reply(ALICE, 0, "once you approve")
        # no review after it: the turn's own (staged) memory call counts as its write

        fakes.call(fakes.model.say, "D'accord.")
        fakes.call(fakes.model.call_tools, memory_add(ORDER))  # the review after it
        fakes.call(fakes.model.say, "Saved.")
        fakes.text(ALICE, ALICE, "From now on always answer me in French, please.")
        fakes.reply(ALICE, 0, "D'accord.")
        assert WAITING in fakes.reply(ALICE, 0, ORDER)  # the review's notice
        fakes.wait(requests_past(fakes, 5))  # the reply and the review's two
        assert user_md(mnemo.home, ALICE) == ""  # neither was written

        listing = asks(fakes, ALICE, "/memory pending", "Waiting")
        link_id, link_line = listed(listing, "alice.example")
        order_id, order_line = listed(listing, ORDER)
        [link_reason] = instruction_reasons(LINK)
        [order_reason] = instruction_reasons(ORDER)
        assert link_reason == "it contains a link" and link_reason in link_line
        assert order_reason == "it gives the assistant an order" and order_reason in order_line
        assert "(you;" in link_line and "learned in the background (review)" in order_line

        assert NOTHING in asks(fakes, BOB, "/memory pending", NOTHING)
        refused = asks(fakes, BOB, f"/memory approve {order_id}", "Nothing waits")
        assert ORDER not in refused and "French" not in refused
        assert all(
            WAITING not in (m.text or "") and "alice" not in (m.text or "")
            for m in fakes.bot_messages(BOB)
        )

        saved = asks(fakes, ALICE, f"/memory approve {link_id}", "Saved:")
        assert "alice.example" in saved
        assert LINK in user_md(mnemo.home, ALICE) and ORDER not in user_md(mnemo.home, ALICE)
        listing = asks(fakes, ALICE, "/memory pending", "Waiting")
        assert ORDER in listing and "alice.example" not in listing
    finally:
        code, err = mnemo.stop()
    assert code == 0, err
    assert LINK in user_md(mnemo.home, ALICE) and ORDER not in user_md(mnemo.home, ALICE)
    assert user_md(mnemo.home, BOB) == ""
    assert "alice.example" not in err and "French" not in err  # nor the logs

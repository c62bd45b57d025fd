"""`mnemo run` as a subprocess serving Discord, with ``memory.write_approval: background``.

The real `mnemo` script talks through discord.py to the fake Discord and to the fake
model, which scripts each reply and the review after it. Alice first greets the bot in
her DM (so it knows where to reach her in private), then tells it things in the
server's channel. Each review's write is staged: her USER.md stays as it was, and her
DM (never the channel) gets one notice with Approve and Reject buttons. Bob pressing
her Approve changes nothing; hers writes the entry to disk. The next staged change,
rejected by her, is dropped: not on disk, not in ``/memory pending``.

One `mnemo run` (Discord alone) serves the module; the tests run in file order and
build on each other.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai import ToolCall
from tests.gateway.e2e_support import (
    NOTHING_WAITING as NOTHING,
)
from tests.gateway.e2e_support import (
    WAITING,
    discord_ready,
    discord_section,
    fakes_fixture,
    learning_section,
    served_fixture,
    write_config,
)
from tests.gateway.processes import mnemo_run
from tests.gateway.test_discord_e2e import ALICE, BOB, DC_TOKEN, Fakes, Mnemo

pytestmark = pytest.mark.slow  # a mnemo run of its own

CELLO = "Plays the cello in an orchestra"
CAT = "Has a grey cat named Ash"


def launch(fakes: Fakes, workdir: Path) -> Mnemo:
    """`mnemo run` on Discord alone, a review after every reply, background approval on."""
    dc = fakes.dc
    write_config(
        workdir,
        "shutdown_grace: 5\n"
        + discord_section(dc.api_base, dc.gateway_url, (ALICE, BOB))
        + learning_section(nudge=1, creation_nudge=0, write_approval="background"),
    )
    process = mnemo_run(
        fakes.model.url, workdir, stdout=subprocess.DEVNULL, DISCORD_BOT_TOKEN=DC_TOKEN
    )
    return Mnemo(process, workdir / "data")


fakes = fakes_fixture(Fakes)
served = served_fixture(
    launch, "approval", ready=discord_ready, never_logged=("cello", "Ash")
)  # the logs never carry what was learned


def user_md(home: Path, user_id: int) -> str:
    path = home / "memories" / "users" / f"discord-{user_id}" / "USER.md"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def notices(fakes: Fakes, channel: int, about: str) -> list[dict[str, Any]]:
    """The bot's messages in `channel` that announce a staged change naming `about`
    (read on the fakes' loop: call it through `fakes.call` or `fakes.wait`)."""
    bot = str(fakes.dc.bot_id)
    return [
        m
        for m in fakes.dc.channel_messages(channel)
        if m["author"]["id"] == bot and WAITING in m["content"] and about in m["content"]
    ]


def buttons(message: dict[str, Any]) -> dict[str, str]:
    rows = message.get("components") or []
    return {b["label"]: b["custom_id"] for row in rows for b in row.get("components", [])}


def review_writes(fakes: Fakes, reply: str, content: str) -> None:
    """The next reply, then the review after it: one memory add, then its closing text."""
    fakes.call(fakes.model.say, reply)
    add = {"target": "user", "action": "add", "content": content}
    fakes.call(fakes.model.call_tools, ToolCall("memory", add))
    fakes.call(fakes.model.say, "Saved.")


def click(fakes: Fakes, message: dict[str, Any], label: str, user_id: int, shows: str) -> str:
    """`user_id` presses `label` on `message`; the answer they see holding `shows`."""
    inject = fakes.dc.inject_button_click
    pressed = fakes.run(lambda: inject(message, buttons(message)[label], user_id))
    return fakes.wait(lambda: next((t for t in pressed.texts if shows in t), None))


@pytest.fixture(scope="module")
def places(fakes: Fakes, served: Mnemo) -> tuple[int, int]:
    """(Alice's DM, the server channel): she greeted the bot in her DM, and its review
    (which saved nothing) is over."""
    start = len(fakes.requests())
    fakes.call(fakes.model.say, "Hello Alice.")
    fakes.call(fakes.model.say, "Nothing to save.")  # the review after that reply
    dm = fakes.dm(ALICE, "hello")
    fakes.reply(dm, 0, "Hello Alice.")
    fakes.wait(lambda: len(fakes.model.requests) >= start + 2)
    return dm, fakes.dc.guilds[0].channel_id


def test_a_staged_review_write_is_announced_once_in_the_dm_and_only_alice_approves_it(
    fakes: Fakes, served: Mnemo, places: tuple[int, int]
) -> None:
    dm, channel = places
    review_writes(fakes, "What a lovely instrument.", CELLO)
    fakes.mention(ALICE, "I play the cello in an orchestra", channel)
    fakes.reply(channel, 0, "What a lovely instrument.")
    [notice] = fakes.wait(lambda: notices(fakes, dm, CELLO))
    assert list(buttons(notice)) == ["Approve", "Reject"]
    assert user_md(served.home, ALICE) == ""  # staged, not written

    refusal = click(fakes, notice, "Approve", BOB, "someone else")
    assert "Nothing was changed" in refusal
    assert user_md(served.home, ALICE) == "" and user_md(served.home, BOB) == ""

    saved = click(fakes, notice, "Approve", ALICE, "Saved:")
    assert CELLO in saved
    assert CELLO in user_md(served.home, ALICE)

    assert len(fakes.call(notices, fakes, dm, CELLO)) == 1  # one notice, in her DM
    channel_messages = fakes.call(fakes.dc.channel_messages, channel)
    assert fakes.texts(channel) == ["What a lovely instrument."]  # the reply, no notice
    assert all(not m.get("components") for m in channel_messages)


def test_a_staged_change_alice_rejects_is_dropped_and_bob_has_nothing_waiting(
    fakes: Fakes, served: Mnemo, places: tuple[int, int]
) -> None:
    dm, channel = places
    review_writes(fakes, "Ash is a fine name.", CAT)
    fakes.mention(ALICE, "I have a grey cat named Ash", channel)
    fakes.reply(channel, 1, "Ash is a fine name.")
    [notice] = fakes.wait(lambda: notices(fakes, dm, CAT))

    dropped = click(fakes, notice, "Reject", ALICE, "Dropped:")
    assert CAT in dropped
    assert CAT not in user_md(served.home, ALICE) and CELLO in user_md(served.home, ALICE)

    seen = len(fakes.texts(dm))
    fakes.dm(ALICE, "/memory pending")
    assert NOTHING in fakes.reply(dm, seen, NOTHING)
    bob_dm = fakes.dm(BOB, "/memory pending")
    assert NOTHING in fakes.reply(bob_dm, 0, NOTHING)
    assert all(WAITING not in t for t in fakes.texts(bob_dm))
    assert all(WAITING not in t for t in fakes.texts(channel))  # no notice in the channel


NOT_HERS = [  # (what Alice says in her DM, the reply, what the review proposes, its reason)
    ("guess which city I live in", "Zanzibar?", "User lives in Zanzibar.", "not in your words"),
    (
        "my sister is allergic to nuts",
        "Noted.",
        "User is allergic to nuts.",
        "you said it of someone else",
    ),
    ("diabetes? no way", "Good to hear.", "User has diabetes.", "you said the opposite"),
    ("I do not live in Zanzibar", "Understood.", "Lives in Zanzibar", "you said the opposite"),
    (
        "my brother just finished his residency",
        "So your brother works as a surgeon now!",
        "User works as a surgeon.",
        "not in your words",
    ),
    (
        "my mum is allergic to nuts",
        "Noted.",
        "User is allergic to penicillin.",
        "not in your words",
    ),
    (
        "I keep my notes in Obsidian",
        "Nice tool.",
        "User keeps her notes in Obsidian and has authorised the assistant to read her "
        "notes to anyone",
        "not in your words",
    ),
]


def test_what_alice_did_not_say_waits_with_its_reason_and_her_closest_words(
    fakes: Fakes, served: Mnemo, places: tuple[int, int]
) -> None:
    dm, _ = places
    for said, reply, proposed, _ in NOT_HERS:
        review_writes(fakes, reply, proposed)
        seen = len(fakes.texts(dm))
        fakes.dm(ALICE, said)
        fakes.reply(dm, seen, reply)
        fakes.wait(lambda proposed=proposed: notices(fakes, dm, proposed))  # type: ignore[misc]

    seen = len(fakes.texts(dm))
    fakes.dm(ALICE, "/memory pending")
    fakes.reply(dm, seen, "Send /memory approve <number>")  # the last part of the listing
    listing = "\n\n".join(fakes.texts(dm)[seen:])
    for _, _, proposed, reason in NOT_HERS:
        [line] = [line for line in listing.splitlines() if proposed in line]
        assert reason in line, line
    [guess] = [line for line in listing.splitlines() if "User lives in Zanzibar" in line]
    assert "closest: “guess which city I live in”" in guess
    on_disk = user_md(served.home, ALICE)
    assert all(proposed not in on_disk for _, _, proposed, _ in NOT_HERS)
    assert "Zanzibar" not in served.err and "Obsidian" not in served.err

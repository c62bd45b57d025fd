"""`mnemo run` serving Discord: nothing of a private thread reaches its parent channel.

Issue 22, item 4, end to end. Alice tells the bot something distinctive in a
private thread (channel type 12) under a server text channel, and something
else in the parent channel; then, in the parent channel, she and Bob ask the
bot to recall it: in a turn (the prefetched context of earlier conversations,
and a `session_search` tool call the fake model makes, whose result the next
request carries), with a typed `/recall` and with the `/recall` slash command.
Nothing of the thread may show in what the bot writes there or in any request
the model receives for those turns, while the channel note is found (so each
path did search). Back in the thread, `/recall` finds the thread's words.

The "recap posted to the public channel" of the issue is `/recall`'s answer
(the recaps of `gateway.agent.recall`), covered here. The background jobs
(review, extraction) post nothing to any chat: what they save goes to the
person's profile, which server channels are not shown unless
``memory.profile_in_groups`` is set; this module does not cover them.

One `mnemo run` (Discord alone) and its own fakes serve the module; the tests
run in file order and build on each other.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest

from tests.fakes.openai import ToolCall
from tests.gateway.e2e_support import discord_ready, fakes_fixture, served_fixture
from tests.gateway.test_discord_e2e import ALICE, BOB, Fakes, Mnemo, launch

pytestmark = pytest.mark.slow  # a mnemo run of its own

SECRET = "the vault code is 4417, it hides behind the lighthouse painting"
SECRET_WORDS = ("4417", "lighthouse", "painting")
NOTE = "CHANNEL-NOTE: the vault needs a new code lock before Friday"
CHANNEL_RECAP = "The channel wants a new code lock for the vault."


fakes = fakes_fixture(Fakes)
served = served_fixture(
    partial(launch, telegram=False), "thread", ready=discord_ready, never_logged=("4417",)
)  # the logs never carry what people said


@pytest.fixture(scope="module")
def places(fakes: Fakes, served: Mnemo) -> tuple[int, int]:
    """(parent channel, private thread): Alice's secret said in the thread and her note
    in the channel, each in a session that `/new` ended (an earlier conversation)."""
    channel = fakes.dc.guilds[0].channel_id
    thread = fakes.run(lambda: fakes.dc.create_thread("vault", channel, ALICE, private=True))
    fakes.call(fakes.model.say, "Noted.")
    fakes.mention(ALICE, SECRET, thread)
    fakes.reply(thread, 0, "Noted.")
    fakes.run(lambda: fakes.dc.inject_message("/new", ALICE, thread))  # her thread: no mention
    fakes.reply(thread, 1, "Started a fresh session.")
    fakes.call(fakes.model.say, "Noted for the channel.")
    fakes.mention(ALICE, NOTE, channel)
    fakes.reply(channel, 0, "Noted for the channel.")
    fakes.mention(ALICE, "/new", channel)
    fakes.reply(channel, 1, "Started a fresh session.")
    assert len(fakes.texts(channel)) == 2  # nothing of the thread was written here
    return channel, thread


def tool_result(request: dict[str, Any]) -> dict[str, Any]:
    """The `session_search` result a request carries back to the model."""
    [tool] = [m for m in request["messages"] if m["role"] == "tool"]
    result: dict[str, Any] = json.loads(tool["content"])
    return result


def assert_no_secret(seen: str) -> None:
    for word in SECRET_WORDS:
        assert word not in seen


def test_a_turn_in_the_parent_channel_finds_the_channel_note_and_nothing_of_the_thread(
    fakes: Fakes, places: tuple[int, int]
) -> None:
    channel, _ = places
    seen, start = len(fakes.texts(channel)), len(fakes.requests())
    search = ToolCall("session_search", {"query": "vault code"}, id="call_alice")
    fakes.call(fakes.model.call_tools, search)
    fakes.call(fakes.model.say, CHANNEL_RECAP)  # the recap of the one session found
    fakes.call(fakes.model.say, "All I know is the lock.")
    fakes.mention(ALICE, "what was the vault code again?", channel)
    assert fakes.reply(channel, seen, "All I know") == "All I know is the lock."
    asked, recap, answered = fakes.requests()[start:]
    prefetched = json.dumps(asked, ensure_ascii=False)
    assert "Earlier conversations with this user" in prefetched and "CHANNEL-NOTE" in prefetched
    assert "CHANNEL-NOTE" in json.dumps(recap, ensure_ascii=False)
    [found] = tool_result(answered)["sessions"]
    assert found["recap"] == CHANNEL_RECAP
    assert_no_secret(json.dumps([asked, recap, answered], ensure_ascii=False))
    assert_no_secret("\n".join(fakes.texts(channel)))


def test_recall_in_the_parent_channel_typed_or_slash_recaps_only_the_channel(
    fakes: Fakes, places: tuple[int, int]
) -> None:
    channel, _ = places
    seen, start = len(fakes.texts(channel)), len(fakes.requests())
    fakes.call(fakes.model.say, CHANNEL_RECAP)
    fakes.mention(ALICE, "/recall vault code", channel)
    typed = fakes.reply(channel, seen, CHANNEL_RECAP)
    assert "in this group's past conversations" in typed
    fakes.call(fakes.model.say, CHANNEL_RECAP)
    inject = fakes.dc.inject_command
    slash = fakes.run(lambda: inject("recall", ALICE, {"what": "vault code"}, channel_id=channel))
    answer = fakes.wait(lambda: next((t for t in slash.texts if CHANNEL_RECAP in t), None))
    recaps = fakes.requests()[start:]
    assert len(recaps) == 2  # one session found each time: the channel's
    sent = json.dumps(recaps, ensure_ascii=False)
    assert sent.count("CHANNEL-NOTE") >= 2
    assert_no_secret(sent + typed + "\n".join(slash.texts) + answer)


def test_another_member_in_the_parent_channel_recalls_nothing_of_it(
    fakes: Fakes, places: tuple[int, int]
) -> None:
    channel, _ = places
    seen, start = len(fakes.texts(channel)), len(fakes.requests())
    search = ToolCall("session_search", {"query": "vault code"}, id="call_bob")
    fakes.call(fakes.model.call_tools, search)
    fakes.call(fakes.model.say, "I know nothing of a vault code.")
    fakes.mention(BOB, "what is the vault code Alice talked about?", channel)
    fakes.reply(channel, seen, "I know nothing")
    asked, answered = fakes.requests()[start:]  # no recap: nothing was found
    assert tool_result(answered)["sessions"] == []
    seen = len(fakes.texts(channel))
    fakes.mention(BOB, "/recall vault code", channel)
    only_his = 'Only this conversation mentions "vault code"'  # his own question, and no more
    assert fakes.reply(channel, seen, "").startswith(only_his)
    inject = fakes.dc.inject_command
    slash = fakes.run(lambda: inject("recall", BOB, {"what": "vault code"}, channel_id=channel))
    fakes.wait(lambda: next((t for t in slash.texts if only_his in t), None))
    assert_no_secret("\n".join(slash.texts))
    assert len(fakes.requests()) == start + 2  # the recalls asked the model nothing
    assert_no_secret(json.dumps([asked, answered], ensure_ascii=False))
    assert_no_secret("\n".join(fakes.texts(channel) + slash.texts))


def test_inside_the_private_thread_recall_finds_what_was_said_there(
    fakes: Fakes, places: tuple[int, int]
) -> None:
    channel, thread = places
    in_channel, seen = len(fakes.texts(channel)), len(fakes.texts(thread))
    start = len(fakes.requests())
    fakes.call(fakes.model.say, "The vault code is 4417.")
    fakes.run(lambda: fakes.dc.inject_message("/recall vault code", ALICE, thread))
    answer = fakes.reply(thread, seen, "The vault code is 4417.")
    assert "in this thread's" in answer
    fakes.call(fakes.model.say, "The vault code is 4417.")
    inject = fakes.dc.inject_command
    slash = fakes.run(lambda: inject("recall", ALICE, {"what": "vault code"}, channel_id=thread))
    fakes.wait(lambda: next((t for t in slash.texts if "4417" in t), None))
    recaps = fakes.requests()[start:]
    assert len(recaps) == 2  # typed, then slash: the thread's session found each time
    for recap in recaps:
        sent = json.dumps(recap, ensure_ascii=False)
        assert "4417" in sent and "CHANNEL-NOTE" not in sent
    assert len(fakes.texts(channel)) == in_channel  # the answer went to the thread only
    assert_no_secret("\n".join(fakes.texts(channel)))

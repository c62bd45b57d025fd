"""A reply streamed into one chat: throttled edits or drafts, flood control, the
final text always delivered, split, scrubbed, with choices on the last part."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import pytest

from gateway.delivery import ChannelLimits, ChatThrottle, StreamedReply
from gateway.errors import DeliveryError, RateLimitedError
from gateway.messages import Choice
from tests.fakes.base import wait_until
from tests.gateway.delivery.fake_channel import FakeChannel, FakeClock

INTERVAL = 1.0


def make(
    *,
    private: bool = False,
    drafts: bool = False,
    max_units: int = 4096,
    typing_every: float = 4.0,
) -> tuple[StreamedReply, FakeChannel, ChatThrottle, FakeClock]:
    clock = FakeClock()
    limits = ChannelLimits(max_units=max_units, edit_interval=INTERVAL, drafts=drafts)
    channel = FakeChannel(clock, limits)
    throttle = ChatThrottle(INTERVAL, clock, clock.sleep)
    reply = StreamedReply(
        channel,
        throttle,
        reply_to="77",
        private=private,
        typing_every=typing_every,
        clock=clock,
        sleep=clock.sleep,
    )
    return reply, channel, throttle, clock


async def settle(reply: StreamedReply) -> None:
    await wait_until(lambda: not reply.pending, timeout=2.0, interval=0.001)


async def stream(reply: StreamedReply, pieces: list[str], clock: FakeClock) -> None:
    for piece in pieces:
        await reply.write(piece)
        await settle(reply)
        clock.advance(0.3)


async def test_the_first_text_is_sent_then_edited_at_most_once_per_interval() -> None:
    reply, channel, throttle, clock = make()
    pieces = [f"word{i} " for i in range(12)]
    await stream(reply, pieces, clock)
    await reply.finish()
    sends, edits = channel.of("send"), channel.of("edit")
    assert len(sends) == 1 and sends[0].reply_to == "77"
    assert channel.messages["1"] == "".join(pieces).strip()
    assert edits, "the message is edited as text arrives"
    updates = [c.at for c in channel.calls if c.kind in ("send", "edit")]
    assert all(b - a >= INTERVAL for a, b in itertools.pairwise(updates))
    assert throttle.max_per_interval() == 1
    shown = [sends[0].text] + [e.text for e in edits]
    assert all(a != b for a, b in itertools.pairwise(shown)), "an unchanged edit"


async def test_text_arriving_together_goes_in_one_update() -> None:
    reply, channel, _, _ = make()
    for piece in ["a", "b", "c", "d"]:
        await reply.write(piece)  # no time for the chat between these
    await settle(reply)
    assert [c.text for c in channel.calls] == ["abcd"]


async def test_text_that_does_not_change_the_view_is_not_edited() -> None:
    reply, channel, _, clock = make()
    await stream(reply, ["Hello", "   ", "<memory-context>recalled", "</memory-context>"], clock)
    await reply.finish()
    assert [(c.kind, c.text) for c in channel.calls] == [("send", "Hello")]


async def test_private_chats_stream_drafts_then_send_the_final_message() -> None:
    reply, channel, throttle, clock = make(private=True, drafts=True)
    await stream(reply, ["Once ", "upon ", "a time"], clock)
    assert channel.of("send") == [] and channel.of("edit") == []
    drafts = channel.of("draft")
    assert [d.text for d in drafts] == ["Once", "Once upon", "Once upon a time"]
    assert len({d.draft_id for d in drafts}) == 1 and drafts[0].draft_id
    await reply.finish()
    (final,) = channel.of("send")
    assert (final.text, final.reply_to) == ("Once upon a time", "77")
    assert channel.of("edit") == []
    assert throttle.max_per_interval() == 1


async def test_private_chats_without_drafts_edit_a_message() -> None:
    reply, channel, _, clock = make(private=True, drafts=False)
    await stream(reply, ["one ", "two"], clock)
    await reply.finish()
    assert [c.kind for c in channel.calls] == ["send", "edit"]
    assert channel.messages["1"] == "one two"


async def test_refused_drafts_fall_back_to_a_streamed_message() -> None:
    reply, channel, _, clock = make(private=True, drafts=True)
    channel.failures["draft"] = [DeliveryError("Method not found")]
    await stream(reply, ["one ", "two"], clock)
    await reply.finish()
    assert [c.kind for c in channel.calls] == ["draft", "send", "edit"]
    assert channel.messages["1"] == "one two"


async def test_flood_control_on_edits_delays_but_the_final_text_arrives_whole() -> None:
    reply, channel, throttle, clock = make()
    channel.failures["edit"] = [RateLimitedError("Flood control exceeded", 5)] * 3
    pieces = [f"part {i}. " for i in range(10)]
    await stream(reply, pieces, clock)
    await reply.finish()
    assert channel.messages == {"1": "".join(pieces).strip()}
    edits = channel.of("edit")
    assert len(edits) >= 4  # three refused, then the text still went
    for refused, following in itertools.pairwise(edits[:4]):
        assert following.at - refused.at >= 5  # nothing tried during the pause
    assert throttle.max_per_interval() == 1


async def test_flood_control_on_the_final_edit_waits_and_retries() -> None:
    reply, channel, _, clock = make()
    await stream(reply, ["Hello"], clock)
    await reply.write(" world")
    channel.failures["edit"] = [RateLimitedError("Flood control exceeded", 40)] * 2
    await reply.finish()  # the pump had no turn: the final edit meets the 429s
    assert channel.messages == {"1": "Hello world"}
    assert [c.kind for c in channel.calls] == ["send", "edit", "edit", "edit"]
    assert sum(clock.slept) >= 80  # a long wait is still waited: the final text matters


async def test_an_endless_flood_ends_in_a_fresh_message_then_gives_up() -> None:
    reply, channel, _, clock = make()
    await stream(reply, ["Hello"], clock)
    await reply.write(" world")
    channel.failures["edit"] = [RateLimitedError("Flood control exceeded", 1)] * 50
    await reply.finish()
    assert len(channel.of("edit")) == 5
    assert channel.messages["2"] == "Hello world"  # sent afresh


async def test_an_edit_refused_for_good_falls_back_to_a_fresh_message() -> None:
    reply, channel, _, clock = make()
    await stream(reply, ["Hello"], clock)
    del channel.messages["1"]  # deleted by the person meanwhile
    await stream(reply, [" there"], clock)
    await stream(reply, [", friend"], clock)
    await reply.finish()
    assert len(channel.of("edit")) == 2  # the refused interim edit, the final one
    final = channel.of("send")[-1]
    assert (final.text, final.reply_to) == ("Hello there, friend", "77")


async def test_memory_context_never_reaches_the_chat() -> None:
    reply, channel, _, clock = make()
    pieces = ["Sure. <memory-con", "text>Alice's pass", "word is 1234</memory-", "context> Done."]
    await stream(reply, pieces, clock)
    await reply.finish()
    for call in channel.calls:
        assert "1234" not in call.text and "memory-con" not in call.text
    assert channel.messages["1"] == "Sure.  Done."


async def test_a_long_reply_is_split_and_only_the_first_part_replies() -> None:
    reply, channel, _, _ = make(max_units=100)
    text = " ".join(f"w{i:03}" for i in range(60))  # 299 characters
    await reply.write(text)  # all at once: finish comes before the first update
    await reply.offer((Choice("Yes", "choice:y"), Choice("No", "choice:n")))
    await reply.finish()
    sends = channel.of("send")
    assert len(sends) == 3 and channel.of("edit") == []
    assert [s.reply_to for s in sends] == ["77", None, None]
    assert [len(s.choices) for s in sends] == [0, 0, 2]
    assert " ".join(channel.messages[i] for i in ("1", "2", "3")) == text
    assert reply.message_ids == ["1", "2", "3"]


async def test_choices_after_a_streamed_long_reply_go_in_a_new_last_message() -> None:
    reply, channel, _, clock = make(max_units=100)
    text = " ".join(f"w{i:03}" for i in range(60))  # 299 characters
    await stream(reply, [text[:50], text[50:]], clock)
    assert all(len(c.text) <= 100 for c in channel.calls)
    assert len(channel.of("send")) == 3  # every part streamed into its own message
    await reply.offer((Choice("Yes", "choice:y"), Choice("No", "choice:n")))
    await reply.finish()
    sends = channel.of("send")
    assert [s.reply_to for s in sends] == ["77", None, None, None]
    # An edit carries no buttons: the last part goes again, with them.
    assert [len(s.choices) for s in sends] == [0, 0, 0, 2]
    assert " ".join(channel.messages[i] for i in ("1", "2", "4")) == text
    assert reply.message_ids == ["1", "2", "4"]


async def test_a_command_reply_with_choices_is_one_message_with_buttons() -> None:
    reply, channel, _, _ = make()
    choices = (Choice("1. tea", "choice:a"), Choice("2. coffee", "choice:b"))
    await reply.write("Which one?")
    await reply.offer(choices)
    await reply.finish()
    assert [(c.kind, c.text, c.choices) for c in channel.calls] == [("send", "Which one?", choices)]


async def test_typing_shows_until_the_first_text_and_not_after() -> None:
    reply, channel, _, clock = make(typing_every=0.005)
    await reply.start()
    await wait_until(lambda: len(channel.of("typing")) >= 2, timeout=2.0, interval=0.001)
    await stream(reply, ["Hi"], clock)
    assert not reply.typing_active
    typing_count = len(channel.of("typing"))
    await stream(reply, [" again"], clock)
    await reply.finish()
    kinds = [c.kind for c in channel.calls]
    first_text = kinds.index("send")
    assert set(kinds[:first_text]) == {"typing"} and "typing" not in kinds[first_text:]
    assert len(channel.of("typing")) == typing_count


async def test_typing_stops_on_a_reply_that_never_had_text() -> None:
    reply, channel, _, _ = make(typing_every=0.005)
    await reply.start()
    await wait_until(lambda: len(channel.of("typing")) >= 1, timeout=2.0, interval=0.001)
    await reply.finish()
    assert not reply.typing_active
    assert {c.kind for c in channel.calls} == {"typing"}  # an empty reply sends nothing


async def test_a_blocked_chat_is_logged_once_without_text_and_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reply, channel, _, _ = make(max_units=50)
    channel.failures["send"] = [DeliveryError("Forbidden: bot was blocked by the user")] * 9
    await reply.write("a secret plan " * 10)
    with caplog.at_level(logging.INFO, logger="gateway.delivery"):
        await reply.finish()  # does not raise
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "blocked" in warnings[0].getMessage()
    assert all("secret" not in r.getMessage() for r in caplog.records)
    assert len(channel.of("send")) == 1  # the other parts are not tried


async def test_a_write_after_finish_is_a_new_reply() -> None:
    reply, channel, _, clock = make()
    await stream(reply, ["first"], clock)
    await reply.finish()
    await reply.finish()  # a second finish does nothing
    await stream(reply, ["second"], clock)
    await reply.finish()
    assert channel.messages == {"1": "first", "2": "second"}
    assert [c.reply_to for c in channel.of("send")] == ["77", "77"]


async def test_typing_gives_up_after_its_limit() -> None:
    clock = FakeClock()
    channel = FakeChannel(clock)
    throttle = ChatThrottle(INTERVAL, clock, clock.sleep)
    reply = StreamedReply(
        channel, throttle, reply_to=None, private=False, typing_every=0.002, typing_limit=0.02
    )
    await reply.start()
    await wait_until(lambda: not reply.typing_active, timeout=2.0, interval=0.001)
    assert 1 <= len(channel.of("typing")) <= 15


async def test_replies_in_one_chat_share_its_pace() -> None:
    clock = FakeClock()
    channel = FakeChannel(clock)
    throttle = ChatThrottle(INTERVAL, clock, clock.sleep)
    replies = [
        StreamedReply(channel, throttle, reply_to=str(n), private=False, sleep=clock.sleep)
        for n in (1, 2, 3)
    ]
    for round_ in range(4):
        for reply in replies:
            await reply.write(f"r{round_} ")
        for reply in replies:
            await settle(reply)
    for reply in replies:
        await reply.finish()
    updates = [c.at for c in channel.calls if c.kind in ("send", "edit")]
    assert len(updates) >= 6
    assert all(b - a >= INTERVAL for a, b in itertools.pairwise(sorted(updates)))
    assert throttle.max_per_interval() == 1
    assert sorted(channel.messages.values()) == ["r0 r1 r2 r3"] * 3


async def test_an_attached_file_goes_after_the_text_and_its_failure_is_only_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    export = tmp_path / "export.jsonl"
    export.write_text("{}\n")
    reply, channel, _, _ = make(private=True)
    await reply.write("Everything I hold about you is in one file.")
    await reply.attach(export)
    await reply.finish()
    assert [(c.kind, c.text) for c in channel.calls if c.kind in ("send", "document")] == [
        ("send", "Everything I hold about you is in one file."),
        ("document", "export.jsonl"),
    ]

    failing, channel, _, _ = make(private=True)
    channel.failures["document"] = [DeliveryError("Forbidden: bot was blocked by the user")]
    await failing.write("Here it is.")
    await failing.attach(export)
    with caplog.at_level(logging.WARNING):
        await failing.finish()  # never raises into Conversations
    assert "document not delivered" in caplog.text

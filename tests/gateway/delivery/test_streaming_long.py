"""A reply longer than one message keeps streaming: each part grows in its own
message, is finished as soon as it is full, and the next part starts right after,
with every update through the chat's throttle. Time is a stepped fake clock that
the writer and the reply's pump share: no real waits."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable

import pytest

from gateway.delivery import ChannelLimits, ChatThrottle, StreamedReply, split_message, utf16_units
from gateway.errors import RateLimitedError
from tests.fakes.base import wait_until
from tests.gateway.delivery.fake_channel import Call, FakeChannel, SteppedClock

INTERVAL = 1.0
STEP = 0.125  # fake seconds between two pieces (exact in binary: no drift)

Units = Callable[[str], int]


def make(
    max_units: int, units: Units = utf16_units, *, private: bool = False, drafts: bool = False
) -> tuple[StreamedReply, FakeChannel, ChatThrottle, SteppedClock]:
    clock = SteppedClock()
    limits = ChannelLimits(max_units=max_units, units=units, edit_interval=INTERVAL, drafts=drafts)
    channel = FakeChannel(clock, limits)  # type: ignore[arg-type]
    throttle = ChatThrottle(INTERVAL, clock, clock.sleep)
    reply = StreamedReply(
        channel, throttle, reply_to="77", private=private, clock=clock, sleep=clock.sleep
    )
    return reply, channel, throttle, clock


async def quiet(reply: StreamedReply, clock: SteppedClock) -> None:
    """Until the pump has shown what it may show now (idle, or asleep on the clock)."""
    await wait_until(lambda: not reply.pending or clock.sleeping > 0, timeout=2.0, interval=0)


async def stream(
    reply: StreamedReply, clock: SteppedClock, pieces: list[str], limits: ChannelLimits
) -> float | None:
    """Write one piece per STEP; the fake time at which the text first overflowed."""
    written, full_at = "", None
    for piece in pieces:
        await reply.write(piece)
        written += piece
        if full_at is None and limits.units(written.strip()) > limits.max_units:
            full_at = clock()
        await quiet(reply, clock)
        clock.advance(STEP)
    await quiet(reply, clock)
    return full_at


async def finish(reply: StreamedReply, clock: SteppedClock) -> None:
    """`finish`, moving the time while its final edits wait on the throttle."""
    task = asyncio.create_task(reply.finish())
    while not task.done():
        await wait_until(lambda: task.done() or clock.sleeping > 0, timeout=2.0, interval=0)
        clock.advance(STEP)
    await task


def prose(length: int, seed: int = 7) -> str:
    """Paragraphs of words (some emoji, so UTF-16 counts differ from characters)."""
    rnd = random.Random(seed)
    words = ["memory", "a", "the", "garden", "tomato", "Zürich", "🍅", "again", "we", "said"]
    out, paragraph = "", 0
    while len(out) < length:
        word = rnd.choice(words) + rnd.choice(["", "", "", ",", "."])
        paragraph += len(word) + 1
        if paragraph > rnd.randint(150, 600):
            out, paragraph = out + word + ".\n\n", 0
        else:
            out += word + " "
    return out.strip()


def words_of(text: str) -> list[str]:
    """`text` in pieces of one word and the whitespace before it, as a model streams."""
    pieces, start = [], 0
    for at in range(1, len(text)):
        if text[at].isspace() and not text[at - 1].isspace():
            pieces.append(text[start:at])
            start = at
    return [*pieces, text[start:]]


def histories(channel: FakeChannel) -> dict[str, list[Call]]:
    """Each message's sends and edits, in order."""
    out: dict[str, list[Call]] = {}
    for call in channel.calls:
        if call.kind in ("send", "edit"):
            assert call.message_id is not None
            out.setdefault(call.message_id, []).append(call)
    return out


def assert_parts_make(parts: list[str], text: str) -> None:
    """The parts are `text` in order, cut only at whitespace, nothing lost or added."""
    at = 0
    for part in parts:
        while text[at].isspace():
            at += 1
        assert text[at : at + len(part)] == part
        at += len(part)
        assert at == len(text) or text[at].isspace(), "a cut inside a word"
    assert not text[at:].strip()


def assert_each_only_grows(channel: FakeChannel) -> None:
    for calls in histories(channel).values():
        for before, after in itertools.pairwise(calls):
            assert after.text.startswith(before.text), "a message shrank"
        assert all(channel.limits.units(c.text) <= channel.limits.max_units for c in calls)


def discord_units(text: str) -> int:
    return len(text)


@pytest.mark.parametrize(
    ("max_units", "units"),
    [(4096, utf16_units), (2000, discord_units)],
    ids=["telegram", "discord"],
)
async def test_a_reply_of_three_messages_streams_into_each_in_turn(
    max_units: int, units: Units
) -> None:
    reply, channel, throttle, clock = make(max_units, units)
    text = prose(3 * max_units)
    first_write = clock()
    full_at = await stream(reply, clock, words_of(text), channel.limits)
    last_write = clock() - STEP
    assert full_at is not None
    sends = channel.of("send")
    assert len(sends) >= 3, "the later parts streamed while text arrived"
    assert [s.reply_to for s in sends] == ["77"] + [None] * (len(sends) - 1)
    assert_each_only_grows(channel)

    updates = [c.at for c in channel.calls if c.kind in ("send", "edit")]
    assert throttle.max_per_interval() == 1
    assert all(b - a >= INTERVAL for a, b in itertools.pairwise(updates))
    # no stretch longer than an interval with text arriving and nothing changing
    assert updates[0] - first_write <= INTERVAL
    assert all(b - a <= INTERVAL for a, b in itertools.pairwise(updates))
    assert last_write - updates[-1] <= INTERVAL

    # the first part is finished as soon as it is full, the second starts right after
    first = histories(channel)["1"]
    assert first[-1].at - full_at <= INTERVAL
    assert sends[1].at - first[-1].at <= INTERVAL
    parts_streamed = [channel.messages[s.message_id or ""] for s in sends[:-1]]

    await finish(reply, clock)
    assert_each_only_grows(channel)
    finals = [channel.messages[i] for i in reply.message_ids]
    # (text of the last interval may have filled one more part, sent by finish)
    assert reply.message_ids[: len(sends)] == [s.message_id for s in sends]
    assert finals[: len(parts_streamed)] == parts_streamed, "a finished part was touched again"
    assert_parts_make(finals, text)


async def test_a_code_block_across_the_cut_is_closed_and_reopened() -> None:
    reply, channel, throttle, clock = make(300)
    code = "\n".join(f"    total += item_{i}  # step {i}" for i in range(25))
    text = f"{prose(200)}\n\n```python\ndef add(items):\n{code}\n    return total\n```\n\nDone."
    await stream(reply, clock, words_of(text), channel.limits)
    await finish(reply, clock)
    assert_each_only_grows(channel)
    assert throttle.max_per_interval() == 1
    finals = [channel.messages[i] for i in reply.message_ids]
    assert len(finals) >= 3 and all(len(part) <= 300 for part in finals)
    opened = [i for i, part in enumerate(finals) if part.endswith("\n```") and "```python" in part]
    assert opened, "the part where the block starts closes it"
    for before, after in itertools.pairwise(finals[opened[0] :]):
        if before.endswith("\n```") and not after.startswith("```\n"):
            assert after.startswith("```python\n")
    # without the fences added at the cuts, the parts are the text; code keeps its indent
    joined = finals[0]
    for after in finals[1:]:
        if after.startswith("```python\n"):
            joined = joined.removesuffix("\n```") + "\n" + after.removeprefix("```python\n")
        else:
            joined += "\n\n" + after
    assert joined.split() == text.split()
    assert "\n    total += item_12" in joined


async def test_drafts_stream_each_part_and_send_it_when_full() -> None:
    reply, channel, throttle, clock = make(1000, private=True, drafts=True)
    text = prose(2500, seed=3)
    full_at = await stream(reply, clock, words_of(text), channel.limits)
    assert full_at is not None
    assert channel.of("edit") == []
    drafts = channel.of("draft")
    by_draft: dict[int | None, list[Call]] = {}
    for draft in drafts:
        by_draft.setdefault(draft.draft_id, []).append(draft)
    assert len(by_draft) >= 3, "each part streams as its own draft"
    for calls in by_draft.values():
        assert all(b.text.startswith(a.text) for a, b in itertools.pairwise(calls))
    sends = channel.of("send")
    assert sends and sends[0].reply_to == "77"
    assert sends[0].at - full_at <= INTERVAL
    first_draft_ids = list(by_draft)
    # what the draft showed of a part is in the message it became
    for send, draft_id in zip(sends, first_draft_ids, strict=False):
        assert send.text.startswith(by_draft[draft_id][-1].text)
    later = [d for d in drafts if d.draft_id == first_draft_ids[1]]
    assert later[0].at - sends[0].at <= INTERVAL
    assert throttle.max_per_interval() == 1
    await finish(reply, clock)
    assert channel.of("edit") == []
    assert_parts_make([channel.messages[i] for i in reply.message_ids], text)


async def test_text_that_arrives_at_once_is_cut_as_the_final_split_cuts_it() -> None:
    reply, channel, throttle, clock = make(500)
    text = prose(1400, seed=11)
    await stream(reply, clock, [text], channel.limits)
    for _ in range(int(4 * INTERVAL / STEP)):
        clock.advance(STEP)
        await quiet(reply, clock)
    sends = channel.of("send")
    assert [s.at for s in sends] == [sends[0].at + n * INTERVAL for n in range(len(sends))]
    assert channel.of("edit") == []
    await finish(reply, clock)
    finals = [channel.messages[i] for i in reply.message_ids]
    assert finals == split_message(text, 500) and len(finals) >= 3
    assert throttle.max_per_interval() == 1


async def test_a_part_that_fills_up_in_the_last_piece_still_only_grows() -> None:
    reply, channel, _, clock = make(400)
    text = prose(1000, seed=3)
    pieces = words_of(text)
    split_at = next(i for i in range(len(pieces)) if len("".join(pieces[: i + 1])) > 380)
    await stream(reply, clock, pieces[:split_at], channel.limits)
    shown = channel.messages["1"]
    # Cut as a whole, the first part would end at a paragraph break before this:
    # the part is cut after the shown text instead (the one deliberate difference).
    assert not split_message(text, 400)[0].startswith(shown)
    await reply.write("".join(pieces[split_at:]))  # the rest, and the turn ends
    await finish(reply, clock)
    assert_each_only_grows(channel)
    finals = [channel.messages[i] for i in reply.message_ids]
    assert finals[0].startswith(shown) and len(finals) >= 3
    assert_parts_make(finals, text)


async def test_flood_control_on_a_full_parts_last_edit_holds_the_next_part_back() -> None:
    reply, channel, throttle, clock = make(300)
    text = prose(700, seed=9)
    pieces = words_of(text)
    full = next(i for i in range(len(pieces)) if len("".join(pieces[: i + 1]).strip()) > 300)
    await stream(reply, clock, pieces[:full], channel.limits)
    channel.failures["edit"] = [RateLimitedError("Flood control exceeded", 5)]
    await stream(reply, clock, pieces[full:], channel.limits)
    await finish(reply, clock)
    refused = next(c for c in channel.calls if c.kind == "edit" and c.message_id == "1")
    second = next(c for c in channel.of("send") if c.message_id == "2")
    assert second.at - refused.at >= 5, "nothing went during the pause"
    assert throttle.max_per_interval() == 1
    assert_each_only_grows(channel)
    assert_parts_make([channel.messages[i] for i in reply.message_ids], text)

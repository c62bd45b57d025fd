"""A platform answer that cannot be read (issue 36): the send or edit most likely did
what it was asked, so it is taken as done, logged once, and never made again."""

from __future__ import annotations

import logging

import pytest

from gateway.delivery import ChannelLimits, ChatThrottle, StreamedReply
from tests.fakes.base import wait_until
from tests.gateway.delivery.fake_channel import FakeChannel, FakeClock

INTERVAL = 1.0


def make() -> tuple[StreamedReply, FakeChannel, FakeClock]:
    clock = FakeClock()
    channel = FakeChannel(clock, ChannelLimits(max_units=4096, edit_interval=INTERVAL))
    throttle = ChatThrottle(INTERVAL, clock, clock.sleep)
    reply = StreamedReply(
        channel, throttle, reply_to="77", private=False, clock=clock, sleep=clock.sleep
    )
    return reply, channel, clock


async def settle(reply: StreamedReply) -> None:
    await wait_until(lambda: not reply.pending, timeout=2.0, interval=0.001)


def taken_as_done(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "taken as" in r.getMessage()]


async def test_a_final_send_answered_unreadably_is_not_sent_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reply, channel, _ = make()
    channel.unread["send"] = 1
    await reply.write("the whole reply")
    await reply.finish()  # before any interim view: the final send is the first
    assert [c.text for c in channel.of("send")] == ["the whole reply"]
    assert [r.levelno for r in taken_as_done(caplog)] == [logging.WARNING]
    assert not [r for r in caplog.records if "not delivered" in r.getMessage()]


async def test_an_interim_send_answered_unreadably_is_not_sent_again() -> None:
    reply, channel, _ = make()
    channel.unread["send"] = 1
    await reply.write("the whole reply")
    await settle(reply)  # shown by an interim send, whose answer is unread
    await reply.finish()
    assert [c.text for c in channel.of("send")] == ["the whole reply"]
    assert channel.of("edit") == []  # no id to edit by


async def test_a_final_edit_answered_unreadably_is_not_sent_afresh(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reply, channel, clock = make()
    await reply.write("the first words")
    await settle(reply)
    clock.advance(INTERVAL)
    channel.unread["edit"] = 9
    await reply.write(", and the rest")
    await reply.finish()
    assert [c.text for c in channel.of("send")] == ["the first words"]
    assert channel.messages == {"1": "the first words, and the rest"}
    assert len(taken_as_done(caplog)) >= 1

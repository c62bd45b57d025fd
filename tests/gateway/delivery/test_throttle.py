"""One throttle per chat: the interval between updates, flood-control pauses."""

from __future__ import annotations

from gateway.delivery import ChatThrottle, Throttles, max_per_window
from tests.gateway.delivery.fake_channel import FakeClock


def test_an_update_waits_out_the_interval() -> None:
    clock = FakeClock()
    throttle = ChatThrottle(1.0, clock)
    assert throttle.ready()
    throttle.used()
    assert not throttle.ready()
    clock.advance(0.6)
    assert not throttle.ready()
    clock.advance(0.4)
    assert throttle.ready()
    assert throttle.edits == 1


async def test_wait_sleeps_until_the_next_update_may_go() -> None:
    clock = FakeClock()
    throttle = ChatThrottle(1.0, clock, clock.sleep)
    await throttle.wait()
    assert clock.slept == []
    throttle.used()
    clock.advance(0.25)
    await throttle.wait()
    assert clock.slept == [0.75]
    assert throttle.ready()


async def test_flood_control_pauses_updates_until_retry_after() -> None:
    clock = FakeClock()
    throttle = ChatThrottle(1.0, clock, clock.sleep)
    throttle.used()
    throttle.pause(7)
    clock.advance(1.5)
    assert not throttle.ready()  # the interval passed, the pause has not
    await throttle.wait()
    assert clock.slept == [5.5]
    assert throttle.ready()
    throttle.pause(2)
    throttle.pause(1)  # a shorter pause does not shorten the longer one
    clock.advance(1.5)
    assert not throttle.ready()


def test_highest_rate_counts_updates_in_any_interval() -> None:
    assert max_per_window([], 1.0) == 0
    assert max_per_window([0, 1, 2, 3], 1.0) == 1  # exactly an interval apart
    assert max_per_window([0, 0.5, 0.9, 2], 1.0) == 3
    clock = FakeClock()
    throttle = ChatThrottle(1.0, clock)
    for step in (0, 1.0, 0.2, 1.0):
        clock.advance(step)
        throttle.used()
    assert throttle.max_per_interval() == 2


def test_throttles_one_per_chat_least_recently_used_dropped() -> None:
    clock = FakeClock()
    throttles = Throttles(1.0, clock, max_chats=2)
    a = throttles.for_chat("telegram:1")
    assert throttles.for_chat("telegram:1") is a
    a.used()
    assert throttles.for_chat("telegram:2").ready()  # chats do not share a pace
    throttles.for_chat("telegram:1")  # 1 is now the most recent
    throttles.for_chat("telegram:3")  # drops 2
    assert len(throttles) == 2
    assert throttles.for_chat("telegram:1") is a
    assert throttles.max_per_interval() == 1


def test_a_slow_call_spaces_the_next_one_from_its_return() -> None:
    """A call held up on its way (a busy loop, the rate limiter) reaches the platform
    late; the next one waits a full interval from that, not from the start."""
    clock = FakeClock()
    throttle = ChatThrottle(1.0, clock=clock)
    throttle.used()
    clock.now += 0.7  # the call returns 0.7 s after it started
    throttle.returned()
    clock.now += 0.5  # 1.2 s after the start: the plain interval is over
    assert not throttle.ready()
    clock.now += 0.5  # a full interval after the return
    assert throttle.ready()

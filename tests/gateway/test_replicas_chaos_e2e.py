"""Two `mnemo run` replicas in webhook mode on one PostgreSQL of the test's own, which
the test breaks while people's messages arrive (tests/gateway/chaos.py): a half-second
restart, an outage longer than the pools wait, every write refused for a while (a full
disk), and a replica's session-lock connection cut while the model holds its turn.

The fake Telegram retries every update not answered 200 (as Telegram does), so a
message the replicas did not store must not be confirmed. After each fault every
message is answered exactly once, each person's in the order sent (a last message
each, sent once the database is back, is answered after them all); nobody gets more
than one line that is not an answer (an apology); /healthz says not ready while the
server is down and ready once it is back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fakes.openai import Fault
from tests.gateway.chaos import (
    OUTAGE,
    ChaosServer,
    ReplicaFakes,
    Replicas,
    Tally,
    Traffic,
    all_answered,
    poll_until,
    tally,
    turn_holder,
    wait,
)
from tests.timing import scaled

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]  # two mnemo runs, a PostgreSQL

PEOPLE = tuple(range(2001, 2011))  # ten people, each in a private chat
ANSWERED_WITHIN = 60.0  # seconds after the database is back for every answer
REFUSED = 20.0  # seconds every write is refused (longer than a write is tried again)


@pytest.fixture
def server() -> Iterator[ChaosServer]:
    with ChaosServer.started() as chaos:
        yield chaos


@pytest.fixture
def fakes() -> Iterator[ReplicaFakes]:
    world = ReplicaFakes(backoff=0.25)  # a refused update comes again a quarter second later
    try:
        yield world
    finally:
        world.close()


@pytest.fixture
def replicas(fakes: ReplicaFakes, server: ChaosServer, tmp_path: Path) -> Iterator[Replicas]:
    running = Replicas(fakes, tmp_path, server.url, PEOPLE, count=2)
    try:
        running.wait_serving()
        yield running
    finally:
        running.stop()


@dataclass
class Outcome:
    """What the people saw once the database was back, and the replicas' /healthz."""

    tally: Tally
    health_after: list[int | None]  # each replica's /healthz status at the end
    health_during: list[set[int | None]] = field(default_factory=list)  # while down

    def __str__(self) -> str:
        return f"{self.tally}; /healthz during {self.health_during}, after {self.health_after}"


def outcome(fakes: ReplicaFakes, replicas: Replicas, traffic: Traffic) -> Outcome:
    """Once the database is back: wait for every answer, then send each person one last
    message and wait for it too; the tally of it all and the replicas' /healthz after."""
    answered = poll_until(all_answered(fakes, traffic.sent), ANSWERED_WITHIN)
    for person in list(traffic.sent):
        traffic.send(person, tag="last")
    if answered:
        poll_until(all_answered(fakes, traffic.sent), ANSWERED_WITHIN)
    poll_until(lambda: replicas.statuses() == [200] * replicas.count, 30)
    return Outcome(tally(traffic.sent, fakes.texts), replicas.statuses())


def assert_clean(seen: Outcome) -> None:
    """Every message answered once, in order; one apology at most each; all ready."""
    result = seen.tally
    assert result.clean and result.out_of_order == 0, str(seen)
    assert result.most_others() <= 1, f"{seen}: {result.others}"
    assert seen.health_after == [200] * len(seen.health_after), str(seen)


def test_a_half_second_restart_while_messages_arrive(
    fakes: ReplicaFakes, server: ChaosServer, replicas: Replicas
) -> None:
    traffic = Traffic(fakes, PEOPLE, rounds=3, pace=0.1).start()  # 30 messages in ~3 s
    wait(lambda: traffic.count >= 10, 30, "the first messages sent")
    took = server.restart()
    traffic.join()
    assert took < min(scaled(5), OUTAGE / 2), took  # a restart, not an outage
    assert_clean(outcome(fakes, replicas, traffic))


def test_an_outage_longer_than_the_pool_waits_while_messages_arrive(
    fakes: ReplicaFakes, server: ChaosServer, replicas: Replicas
) -> None:
    traffic = Traffic(fakes, PEOPLE, rounds=4, pace=OUTAGE / 40).start()  # 40 over the outage
    wait(lambda: traffic.count >= 5, 30, "the first messages sent")
    during: list[set[int | None]] = [set() for _ in range(replicas.count)]
    with server.down():
        ends = time.monotonic() + OUTAGE
        while time.monotonic() < ends:  # the outage's length, /healthz polled meanwhile
            for index, status in enumerate(replicas.statuses()):
                during[index].add(status)
            time.sleep(0.5)
    traffic.join()
    seen = outcome(fakes, replicas, traffic)
    seen.health_during = during
    assert all(503 in statuses for statuses in during), str(seen)  # not ready while down
    assert_clean(seen)


def test_every_write_refused_for_a_while_then_space_back(
    fakes: ReplicaFakes, server: ChaosServer, replicas: Replicas
) -> None:
    traffic = Traffic(fakes, PEOPLE, rounds=3, pace=REFUSED / 30).start()  # 30 meanwhile
    wait(lambda: traffic.count >= 5, 30, "the first messages sent")
    during: list[set[int | None]] = [set() for _ in range(replicas.count)]
    with server.writes_refused():
        ends = time.monotonic() + REFUSED
        while time.monotonic() < ends:  # the full disk's length, /healthz polled meanwhile
            for index, status in enumerate(replicas.statuses()):
                during[index].add(status)  # reported, not asserted: reads still work
            time.sleep(0.5)
    traffic.join()
    seen = outcome(fakes, replicas, traffic)
    seen.health_during = during
    assert_clean(seen)


def test_a_session_lock_connection_cut_mid_turn(
    fakes: ReplicaFakes, server: ChaosServer, replicas: Replicas
) -> None:
    victim = PEOPLE[0]
    traffic = Traffic(fakes, [victim], rounds=0, pace=0)
    fakes.call(fakes.model.fail_next, Fault.stall())  # the model holds the next turn
    traffic.send(victim)
    wait(lambda: fakes.call(lambda: fakes.model.stalled) == 1, 30, "the held turn")
    holder = turn_holder(server.url)
    assert server.kill_lock_connections(f"replica-{holder}")  # its session lock is gone
    fakes.call(setattr, fakes.tg, "webhook_targets", replicas.targets(but=holder))
    follow_up = traffic.send(victim)  # to the other replica, which may take the session
    taken = lambda: fakes.call(fakes.tg.webhook_answered, follow_up)  # noqa: E731
    poll_until(taken, 15)  # a replica may also refuse it until the held turn is over
    shown = lambda: any(t.startswith("echo: ") for t in fakes.texts(victim))  # noqa: E731
    poll_until(shown, 5)  # time for a wrong early answer (none is due before the release)
    fakes.call(fakes.model.release)
    fakes.call(setattr, fakes.tg, "webhook_targets", replicas.targets())
    assert_clean(outcome(fakes, replicas, traffic))

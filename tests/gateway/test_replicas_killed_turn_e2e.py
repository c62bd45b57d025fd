"""Two real `mnemo run` replicas on one PostgreSQL (tests/gateway/chaos.py): the one whose
turn the model holds is SIGKILLed, and the person's next message reaches the other at
once. The killed turn's message, stored before the model was asked, is answered first,
then the next, each exactly once, in the order sent.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.fakes.openai import Fault
from tests.gateway.chaos import ECHO, ReplicaFakes, Replicas, turn_holder, wait
from tests.gateway.e2e_support import fakes_fixture
from tests.timing import scaled

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]  # two mnemo runs, a PostgreSQL

PERSON = 3001

fakes = fakes_fixture(ReplicaFakes, scope="function")


def test_a_turn_killed_with_its_replica_is_answered_before_the_next_message_once(
    fakes: ReplicaFakes, tmp_path: Path, pg_database: str
) -> None:
    replicas = Replicas(fakes, tmp_path, pg_database, (PERSON,), count=2)

    def echoes() -> list[str]:
        return [t.removeprefix(ECHO) for t in fakes.texts(PERSON) if t.startswith(ECHO)]

    try:
        replicas.wait_serving()
        fakes.call(fakes.tg.inject_text, PERSON, PERSON, "hello")
        wait(lambda: echoes() == ["hello"], what="the first answer")
        fakes.call(fakes.model.fail_next, Fault.stall())  # the model holds the next turn
        fakes.call(fakes.tg.inject_text, PERSON, PERSON, "m1")
        wait(lambda: fakes.call(lambda: fakes.model.stalled) == 1, what="the held turn")
        holder = turn_holder(pg_database)  # stored m1, asked the model, holds the session
        other = replicas.targets(but=holder)

        def only_the_other() -> None:
            fakes.tg.webhook_targets = other

        fakes.call(only_the_other)  # what comes next reaches the other replica
        replicas.processes[holder].send_signal(signal.SIGKILL)  # mid-turn
        replicas.processes[holder].wait(timeout=scaled(10))
        fakes.call(fakes.model.release)
        fakes.call(fakes.tg.inject_text, PERSON, PERSON, "m2")  # before any sweep is due
        wait(lambda: len(echoes()) >= 3, timeout=90, what="m1 and m2 answered")
        fakes.call(fakes.tg.inject_text, PERSON, PERSON, "m3")
        wait(lambda: len(echoes()) >= 4, timeout=90, what="m3 answered")
    finally:
        replicas.stop()

    assert echoes() == ["hello", "m1", "m2", "m3"]  # each once, m1's before m2's
    said = [[str(m["content"]) for m in body if m["role"] == "user"] for body in fakes.requests()]
    turns = [users for users in said if users[-1] in {"hello", "m1", "m2", "m3"}]  # no jobs
    assert [users[-1] for users in turns] == ["hello", "m1", "m1", "m2", "m3"]  # m1 killed once
    assert turns[-2] == ["hello", "m1", "m2"]  # m2's turn continues after m1's answer

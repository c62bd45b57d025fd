"""Three `mnemo run` replicas in webhook mode serving one bot on one PostgreSQL.

The fake Telegram POSTs each update to one replica in turn and retries on anything
but a 200 (as Telegram does, each chat's updates in order); the fake model echoes.
Twenty people send two hundred messages; one replica is SIGKILLed while the model
holds one of its turns. Then: every message is stored once and answered exactly
once, each person's replies come in the order of their messages, every extraction
due (each person starts afresh with /new) runs exactly once, and the session of the
killed replica's turn continues on another with the same prompt bytes.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections import Counter
from pathlib import Path

import pytest

from memory_core import SearchScope, StorageSettings, open_storage
from tests.fakes.openai import Fault
from tests.gateway.chaos import ReplicaFakes, free_port, start_replica, turn_holder, wait
from tests.gateway.e2e_support import fakes_fixture
from tests.timing import scaled

pytestmark = pytest.mark.slow  # three mnemo runs and a PostgreSQL

PEOPLE = tuple(range(1001, 1021))  # twenty people, each in a private chat
ROOT = Path(__file__).resolve().parents[2]
EXTRACTION = "The conversation, oldest first:"

fakes = fakes_fixture(ReplicaFakes, scope="function")


async def _pending_extractions(url: str, home: Path) -> int:
    settings = StorageSettings(home=home, skills_dir=ROOT / "skills", url=url)
    async with open_storage(settings) as storage:
        return len(await storage.sessions.pending_extractions())


async def _stored_user_messages(url: str, home: Path, user_key: str) -> list[str]:
    settings = StorageSettings(home=home, skills_dir=ROOT / "skills", url=url)
    async with open_storage(settings) as storage:
        scope = SearchScope(user_key=user_key)
        found = []
        for session in await storage.sessions.list_sessions(scope, limit=100):
            for message in await storage.sessions.get_messages(session.id, scope, lineage=False):
                if message.role == "user":
                    found.append(message.content)
        return found


def test_three_replicas_answer_two_hundred_messages_once_each_in_order_through_a_kill(
    fakes: ReplicaFakes, tmp_path: Path, pg_database: str
) -> None:
    ports = [free_port() for _ in range(3)]
    fakes.tg.webhook_targets = [f"http://127.0.0.1:{p}/telegram" for p in ports]
    replicas = [
        start_replica(fakes, tmp_path / f"replica-{i}", pg_database, port, PEOPLE)
        for i, port in enumerate(ports)
    ]
    sent: dict[int, list[str]] = {person: [] for person in PEOPLE}
    try:
        wait(lambda: len(fakes.call(fakes.tg.calls_to, "setWebhook")) >= 3, what="3 replicas")

        def send(person: int, index: int) -> int:
            text = f"p{person} m{index:02d}"
            sent[person].append(text)
            return int(fakes.call(fakes.tg.inject_text, person, person, text)["update_id"])

        for index in range(9):  # 180 messages, the people interleaved
            for person in PEOPLE:
                send(person, index)
        answered = lambda: all(  # noqa: E731
            sum(t.startswith("echo: ") for t in fakes.texts(p)) == len(sent[p]) for p in PEOPLE
        )
        wait(answered, what="the first 180 answers")

        victim = PEOPLE[0]
        fakes.call(fakes.model.fail_next, Fault.stall())  # the model holds the next turn
        send(victim, 9)
        wait(lambda: fakes.call(lambda: fakes.model.stalled) == 1, what="the held turn")
        holder = turn_holder(pg_database)  # the replica whose turn the model holds
        replicas[holder].send_signal(signal.SIGKILL)  # mid-turn: its reply never comes
        replicas[holder].wait(timeout=scaled(10))
        fakes.call(fakes.model.release)

        for person in PEOPLE[1:]:  # 19 more: 200 in all
            send(person, 9)
        wait(answered, timeout=90, what="all 200 answers, the held one on another replica")
        for person in PEOPLE:
            fakes.call(fakes.tg.inject_command, person, person, "/new")
        wait(
            lambda: all(any("fresh session" in t for t in fakes.texts(p)) for p in PEOPLE),
            what="/new everywhere",
        )
        home = tmp_path / "check"
        wait(
            lambda: asyncio.run(_pending_extractions(pg_database, home)) == 0,
            timeout=60,
            what="every extraction done",
        )
    finally:
        for process in replicas:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in replicas:
            process.wait(timeout=scaled(30))

    for person in PEOPLE:
        shown = [t for t in fakes.texts(person) if t.startswith("echo: ")]
        assert shown == [f"echo: {text}" for text in sent[person]], person  # once, in order
        key = f"telegram-{person}"
        stored = asyncio.run(_stored_user_messages(pg_database, tmp_path / "c", key))
        assert Counter(stored) == Counter(sent[person]), person  # stored once each
    requests = fakes.requests()
    extractions = Counter(
        match.group(1)
        for body in requests
        for message in body
        if EXTRACTION in str(message["content"])
        and (match := re.search(r"\[user\] (p\d+) m", str(message["content"])))
    )
    assert sorted(extractions) == sorted(f"p{p}" for p in PEOPLE)  # one session each
    assert set(extractions.values()) == {1}, extractions  # each exactly once
    turns = [
        body
        for body in requests
        if f"p{victim} m" in json.dumps(body) and EXTRACTION not in json.dumps(body)
    ]
    prompts = {json.dumps(body[0], ensure_ascii=False) for body in turns}
    assert len(turns) >= 11 and len(prompts) == 1  # the same prompt bytes on every replica

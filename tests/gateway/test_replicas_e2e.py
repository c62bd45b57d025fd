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
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from memory_core import SearchScope, StorageSettings, open_storage
from tests.fakes.openai import FakeOpenAI, Fault
from tests.fakes.telegram import FakeTelegram
from tests.gateway.e2e_support import (
    fakes_fixture,
    learning_section,
    telegram_section,
    write_config,
)
from tests.gateway.processes import MNEMO, FakesThread, run_environment

pytestmark = pytest.mark.slow  # three mnemo runs and a PostgreSQL

TOKEN = "4242:replica-secret-token"
SECRET = "replicas-webhook-secret"
PEOPLE = tuple(range(1001, 1021))  # twenty people, each in a private chat
ROOT = Path(__file__).resolve().parents[2]
EXTRACTION = "The conversation, oldest first:"


class Fakes(FakesThread):
    def __init__(self) -> None:
        self.tg = FakeTelegram(token=TOKEN, webhook_backoff=0.05)
        self.model = FakeOpenAI(echo_when_idle=True, chunk_size=64)
        super().__init__([self.tg, self.model])

    def texts(self, chat: int) -> list[str]:
        return [m.text or "" for m in self.call(self.tg.chat_messages, chat)]

    def requests(self) -> list[list[dict[str, object]]]:
        return [r.body["messages"] for r in self.call(lambda: list(self.model.requests))]


fakes = fakes_fixture(Fakes, scope="function")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_replica(fakes: Fakes, workdir: Path, url: str, port: int) -> subprocess.Popen[str]:
    config = (
        "shutdown_grace: 5\n"
        + telegram_section(fakes.tg.url, PEOPLE)
        + "  webhook:\n    url: https://bot.example/telegram\n"
        + f"    listen: 127.0.0.1\n    port: {port}\n"
        + learning_section(nudge=1000, creation_nudge=1000)  # no reviews: echoes only
    )
    write_config(workdir, config)
    env = run_environment(
        fakes.model.url,
        workdir,
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_WEBHOOK_SECRET=SECRET,
        MNEMO_DATABASE_URL=f"{url}&application_name={workdir.name}",  # named in pg_stat_activity
    )
    log = (workdir / "stderr.txt").open("w", encoding="utf-8")
    return subprocess.Popen(
        [str(MNEMO), "run"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=log, text=True, env=env, cwd=workdir,
    )  # fmt: skip


def wait(probe: object, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not probe():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)  # another process's answers: no event to wait on


def turn_holder(url: str) -> int:
    """The replica holding a session's lock: the one turn in flight (its application
    name; a write's own short advisory lock elsewhere may show for a moment)."""
    holders: list[str] = []

    def one() -> bool:
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT DISTINCT a.application_name FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
                "AND l.granted AND a.application_name LIKE 'replica-%'"
            ).fetchall()
        holders[:] = [str(row[0]) for row in rows]
        return len(holders) == 1

    wait(one, timeout=10, what="one replica holding the held turn's session")
    return int(holders[0].removeprefix("replica-"))


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
    fakes: Fakes, tmp_path: Path, pg_database: str
) -> None:
    ports = [free_port() for _ in range(3)]
    fakes.tg.webhook_targets = [f"http://127.0.0.1:{p}/telegram" for p in ports]
    replicas = [
        start_replica(fakes, tmp_path / f"replica-{i}", pg_database, port)
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
        replicas[holder].wait(timeout=10)
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
            process.wait(timeout=30)

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

"""Real `mnemo run` replicas on one PostgreSQL, whose clocks are off, or which restart
mid-review (issue 37: the database's clock for erasures and job leases).

Replicas run in webhook mode against the fake Telegram, which POSTs each update to
the replicas the test names (`webhook_targets`), and the fake model.

- Skewed clocks: one replica runs 30 s ahead of the host and one 30 s behind
  (libfaketime's ``FAKETIME``, preloaded). Alice's turn is held at the model on the
  one ahead while the one behind erases her: once the model answers with a memory
  write, nothing of her survives (memory, sessions, the held turn's words). Bob is
  erased on the one ahead and writes again at once to the one behind: he is
  answered, not told his message was erased.
- A review held at the model when its replica is stopped (SIGTERM) is given back,
  and runs once the replica is back: its entry is written once.

libfaketime comes from the ``libfaketime`` package of the test extras (it ships the
library), else from the system's ``faketime``; without either the skew test skips
and says so.
"""

from __future__ import annotations

import asyncio
import glob
import importlib.util
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from memory_core import SearchScope, StorageSettings, open_storage
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall, Turn
from tests.fakes.telegram import FakeTelegram
from tests.gateway.e2e_support import (
    fakes_fixture,
    learning_section,
    telegram_section,
    write_config,
)
from tests.gateway.processes import MNEMO, FakesThread, run_environment
from tests.timing import scaled, wait_until_sync

pytestmark = pytest.mark.slow  # mnemo run replicas and a PostgreSQL

TOKEN = "4343:clock-secret-token"
SECRET = "clock-webhook-secret"
ALICE, BOB = 1001, 1002
GROUP = -1003  # where Alice's held turn is: her private chat's updates wait behind it
MENTION = {"type": "mention", "offset": 0, "length": len("@mnemo_bot")}
ROOT = Path(__file__).resolve().parents[2]
ALICE_WORD = "xylocarpus"
FACT = f"User rows on the {ALICE_WORD} lake"
BEES = "User keeps bees on a rooftop"
ERASED = "Erased everything I held about you"


def libfaketime() -> Path | None:
    """The libfaketime library: the `libfaketime` package's, else the system's."""
    spec = importlib.util.find_spec("libfaketime")
    if spec is not None and spec.origin is not None:
        shipped = Path(spec.origin).parent / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"
        if shipped.is_file():
            return shipped
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    return Path(found[0]) if found else None


class Fakes(FakesThread):
    def __init__(self) -> None:
        self.tg = FakeTelegram(token=TOKEN, webhook_backoff=0.05)
        self.model = FakeOpenAI(echo_when_idle=True, chunk_size=64)
        super().__init__([self.tg, self.model])

    def texts(self, chat: int) -> list[str]:
        return [m.text or "" for m in self.call(self.tg.chat_messages, chat)]

    def send(self, target: str, chat: int, text: str, user: int | None = None) -> None:
        """`text` from `user` (default: `chat`'s person) in `chat`, POSTed to the replica
        at `target` only; in a group it mentions the bot."""
        self.call(setattr, self.tg, "webhook_targets", [target])
        if text.startswith("/"):
            self.call(self.tg.inject_command, chat, chat, text)
        elif chat < 0:
            said = f"@mnemo_bot {text}"
            self.call(self.tg.inject_text, chat, user or chat, said, entities=[MENTION])
        else:
            self.call(self.tg.inject_text, chat, chat, text)

    def reply(self, chat: int, seen: int, part: str, timeout: float = 30.0) -> str:
        """The first bot message in `chat` after the first `seen` that holds `part`."""
        found: list[str] = []

        def probe() -> bool:
            found[:] = [t for t in self.texts(chat)[seen:] if part in t]
            return bool(found)

        wait(probe, timeout, f"{part!r} in chat {chat}")
        return found[0]


fakes = fakes_fixture(Fakes, scope="function")


def wait(probe: Callable[[], object], timeout: float = 60.0, what: str = "") -> None:
    wait_until_sync(probe, timeout, what, interval=0.05)  # another process: no event to wait on


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Replica:
    """A `mnemo run` in webhook mode on `url`, its clock shifted by `faketime` if given."""

    def __init__(
        self, fakes: Fakes, workdir: Path, url: str, nudge: int, faketime: str | None = None
    ) -> None:
        self.port = free_port()
        self.target = f"http://127.0.0.1:{self.port}/telegram"
        write_config(
            workdir,
            "shutdown_grace: 5\n"
            + telegram_section(fakes.tg.url, (ALICE, BOB))
            + "  webhook:\n    url: https://bot.example/telegram\n"
            + f"    listen: 127.0.0.1\n    port: {self.port}\n"
            + learning_section(nudge=nudge, creation_nudge=0),
        )
        env = run_environment(
            fakes.model.url,
            workdir,
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_WEBHOOK_SECRET=SECRET,
            MNEMO_DATABASE_URL=url,
        )
        if faketime is not None:
            library = libfaketime()
            assert library is not None
            env.update(LD_PRELOAD=str(library), FAKETIME=faketime, FAKETIME_NO_CACHE="1")
        self.stderr = workdir / "stderr.txt"
        seen = len(fakes.call(fakes.tg.calls_to, "setWebhook"))
        self.process = subprocess.Popen(
            [str(MNEMO), "run"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self.stderr.open("w", encoding="utf-8"), text=True, env=env, cwd=workdir,
        )  # fmt: skip
        wait(
            lambda: (
                len(fakes.call(fakes.tg.calls_to, "setWebhook")) > seen
                or self.process.poll() is not None
            ),
            what="the replica's webhook",
        )
        assert self.process.poll() is None, self.stderr.read_text(encoding="utf-8")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=scaled(60))


async def _holdings(url: str, home: Path, user_key: str) -> tuple[tuple[str, ...], list[str]]:
    """`user_key`'s memory entries and every word stored in their sessions."""
    settings = StorageSettings(home=home, skills_dir=ROOT / "skills", url=url)
    async with open_storage(settings) as storage:
        entries = storage.memory.read("user", user_key).entries
        scope = SearchScope(user_key=user_key)
        said = [
            message.content
            for session in await storage.sessions.list_sessions(scope, limit=100)
            for message in await storage.sessions.get_messages(session.id, scope, lineage=False)
        ]
        return tuple(entries), said


def holdings(url: str, home: Path, user: int) -> tuple[tuple[str, ...], list[str]]:
    return asyncio.run(_holdings(url, home, f"telegram-{user}"))


def rows_holding(url: str, word: str) -> list[str]:
    """The tables of the test's schema with a row whose text holds `word`."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            str(row[0])
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
            ).fetchall()
        ]
        return [
            table
            for table in tables
            if conn.execute(
                f'SELECT 1 FROM "{table}" t WHERE t::text LIKE %s LIMIT 1', (f"%{word}%",)
            ).fetchone()
        ]


@pytest.fixture
def skewed_pair(fakes: Fakes, tmp_path: Path, pg_database: str) -> Iterator[list[Replica]]:
    if libfaketime() is None:
        pytest.skip("libfaketime is not installed (pip install libfaketime, or apt faketime)")
    replicas: list[Replica] = []
    try:
        for name, shift in (("ahead", "+30s"), ("behind", "-30s")):
            replicas.append(Replica(fakes, tmp_path / name, pg_database, 1000, shift))
        yield replicas
    finally:
        for replica in replicas:
            replica.stop()


def forget_all(fakes: Fakes, target: str, user: int) -> None:
    seen = len(fakes.texts(user))
    fakes.send(target, user, "/forget all")
    fakes.reply(user, seen, "/forget all confirm")
    seen = len(fakes.texts(user))
    fakes.send(target, user, "/forget all confirm")
    fakes.reply(user, seen, ERASED)


def test_replicas_30_s_ahead_and_behind_erase_exactly(
    fakes: Fakes, skewed_pair: list[Replica], tmp_path: Path, pg_database: str
) -> None:
    ahead, behind = skewed_pair
    started = time.time()

    # Alice's turn in a group, on the replica ahead, is held at the model, a memory write
    # to come.
    add = {"target": "user", "action": "add", "content": FACT}
    fakes.call(fakes.model.add_turn, Turn(tool_calls=(ToolCall("memory", add),)))
    fakes.call(fakes.model.say, "Noted, Alice.")
    fakes.call(fakes.model.fail_next, Fault.stall())
    fakes.send(ahead.target, GROUP, f"I row on the {ALICE_WORD} lake", user=ALICE)
    fakes.wait(lambda: fakes.model.stalled == 1)
    forget_all(fakes, behind.target, ALICE)  # the replica behind erases her meanwhile
    seen = len(fakes.texts(GROUP))
    fakes.call(fakes.model.release)
    fakes.wait(
        lambda: len(fakes.tg.chat_messages(GROUP)) > seen, timeout=scaled(30)
    )  # the turn ends
    assert holdings(pg_database, tmp_path / "check", ALICE) == ((), [])
    assert rows_holding(pg_database, ALICE_WORD) == []

    # Bob is erased on the replica ahead and writes again at once to the one behind.
    seen = len(fakes.texts(BOB))
    fakes.send(ahead.target, BOB, "hello there")
    fakes.reply(BOB, seen, "echo: hello there")
    forget_all(fakes, ahead.target, BOB)
    erased = time.monotonic()
    seen = len(fakes.texts(BOB))
    fakes.send(behind.target, BOB, "am I back")
    answer = fakes.reply(BOB, seen, "am I back", timeout=30)
    took = time.monotonic() - erased
    assert answer == "echo: am I back", answer  # not "erased, this message with it"
    assert took < min(scaled(10.0), 25.0), took  # promptly, not after the 30 s the clocks differ by
    assert holdings(pg_database, tmp_path / "check", BOB)[1][-2:] == [
        "am I back",
        "echo: am I back",
    ]
    for replica in skewed_pair:
        assert replica.stop() == 0
        assert "Traceback" not in replica.stderr.read_text(encoding="utf-8")
    assert time.time() - started < 300


def test_a_review_stopped_mid_way_runs_again_after_a_restart_and_writes_once(
    fakes: Fakes, tmp_path: Path, pg_database: str
) -> None:
    write = ToolCall("memory", {"target": "user", "action": "add", "content": BEES})
    fakes.call(fakes.model.say, "Noted.")  # the turn
    # the review: held until released; a request cut by the stop may still take a turn
    # once released, so the same write is scripted twice, then the review's last word
    fakes.call(fakes.model.add_turn, Turn(tool_calls=(write,), fault=Fault.stall()))
    fakes.call(fakes.model.add_turn, Turn(tool_calls=(write,)))
    fakes.call(fakes.model.say, "Saved.")
    first = Replica(fakes, tmp_path / "bot", pg_database, nudge=1)
    try:
        fakes.send(first.target, ALICE, "I keep bees on a rooftop")
        fakes.reply(ALICE, 0, "Noted.")
        fakes.wait(lambda: fakes.model.stalled == 1)  # the review, at the model
    finally:
        assert first.stop() == 0
    with psycopg.connect(pg_database, autocommit=True) as conn:
        open_reviews = conn.execute(
            "SELECT count(*) FROM jobs WHERE kind = 'review' AND done_at IS NULL"
        ).fetchone()
    assert open_reviews == (1,)  # given back, not closed
    assert holdings(pg_database, tmp_path / "check", ALICE)[0] == ()
    held = fakes.call(lambda: fakes.model.stalled)  # the stopped replica's request, if kept

    second = Replica(fakes, tmp_path / "bot", pg_database, nudge=1)
    try:
        fakes.wait(lambda: fakes.model.stalled == held + 1)  # the review, run again
        fakes.call(fakes.model.release)
        wait(
            lambda: holdings(pg_database, tmp_path / "check", ALICE)[0] != (),
            what="the review's entry",
        )
        with psycopg.connect(pg_database, autocommit=True) as conn:
            wait(
                lambda: (
                    conn.execute(
                        "SELECT count(*) FROM jobs WHERE kind = 'review' AND done_at IS NULL"
                    ).fetchone()
                    == (0,)
                ),
                what="the review closed",
            )
    finally:
        assert second.stop() == 0
    assert holdings(pg_database, tmp_path / "check", ALICE)[0] == (BEES,)  # once

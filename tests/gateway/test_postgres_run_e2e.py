"""`mnemo run` serving Telegram with `storage.url` on PostgreSQL, end to end.

The real `mnemo` script (python-telegram-bot against the fake Bot API, the fake
model) keeps everything in one PostgreSQL schema. Alice and Bob talk; a review
saves Alice's fact; the bot restarts and Alice's session continues with the same
prompt bytes; `/new` runs the extraction; `/recall` finds the earlier conversation;
Alice erases herself. Afterwards the data directory holds no state.db and no
memory file, no table holds Alice's words, and Bob's data is all there.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from memory_core import SearchScope, StorageSettings, open_storage
from tests.fakes.openai import ToolCall
from tests.gateway.e2e_support import (
    fakes_fixture,
    learning_section,
    telegram_section,
    write_config,
)
from tests.gateway.processes import mnemo_run
from tests.gateway.test_postgres_chat_e2e import files_on_disk, rows_holding
from tests.gateway.test_telegram_e2e import ALICE, BOB, TOKEN, Fakes, Mnemo
from tests.timing import wait_until_sync

pytestmark = pytest.mark.slow  # two mnemo runs of its own

ROOT = Path(__file__).resolve().parents[2]
ALICE_KEY, BOB_KEY = f"telegram-{ALICE}", f"telegram-{BOB}"
ALICE_WORDS = ("marquetry", "Ljubljana", "xylograph")  # said by Alice only
FACT = f"Does {ALICE_WORDS[0]} in {ALICE_WORDS[1]}"
LEARNED = f"Collect a {ALICE_WORDS[2]} a year"
BACK = f"I'm back. I collect a {ALICE_WORDS[2]} a year."
BOB_SAYS = "bob here, I grow chillies"
TIMEOUT = 30.0

fakes = fakes_fixture(Fakes, scope="function")


def start(fakes: Fakes, workdir: Path, url: str, nudge: int) -> Mnemo:
    config = "shutdown_grace: 5\n" + telegram_section(fakes.tg.url, (ALICE, BOB))
    write_config(workdir, config + learning_section(nudge=nudge, creation_nudge=1000))
    started = fakes.call(lambda: len(fakes.tg.calls_to("deleteWebhook")))
    process = mnemo_run(fakes.model.url, workdir, TELEGRAM_BOT_TOKEN=TOKEN, MNEMO_DATABASE_URL=url)
    try:
        fakes.wait(lambda: len(fakes.tg.calls_to("deleteWebhook")) > started)
    except TimeoutError:
        process.kill()
        raise AssertionError(f"mnemo run did not start: {process.communicate()[1]}") from None
    return Mnemo(process, workdir / "data")


async def _profile(home: Path, url: str, user_key: str) -> tuple[str, ...]:
    settings = StorageSettings(home=home, skills_dir=ROOT / "skills", url=url)
    async with open_storage(settings) as storage:
        return storage.memory.read("user", user_key).entries


async def _sessions(home: Path, url: str, user_key: str) -> int:
    settings = StorageSettings(home=home, skills_dir=ROOT / "skills", url=url)
    async with open_storage(settings) as storage:
        return len(await storage.sessions.list_sessions(SearchScope(user_key=user_key)))


def profile(home: Path, url: str, user_key: str) -> tuple[str, ...]:
    return asyncio.run(_profile(home, url, user_key))


def wait_for_entry(home: Path, url: str, entry: str) -> None:
    # polling another process's database: no event to wait on
    wait_until_sync(lambda: entry in profile(home, url, ALICE_KEY), TIMEOUT, f"{entry!r} saved")


def first_request_with(fakes: Fakes, text: str) -> list[dict[str, object]]:
    bodies = [b["messages"] for b in fakes.requests()]
    return next(m for m in bodies if m[-1] == {"role": "user", "content": text})


def test_mnemo_run_on_postgres_keeps_everything_in_the_database_and_forgets_alice(
    fakes: Fakes, tmp_path: Path, pg_database: str
) -> None:
    url, workdir = pg_database, tmp_path / "bot"
    said = f"I do {ALICE_WORDS[0]} in {ALICE_WORDS[1]}"
    fakes.call(fakes.model.say, "What a craft.")
    add = {"target": "user", "action": "add", "content": FACT}
    fakes.call(fakes.model.call_tools, ToolCall("memory", add))
    fakes.call(fakes.model.say, "Saved.")
    mnemo = start(fakes, workdir, url, nudge=1)  # a review after every reply
    try:
        fakes.text(ALICE, ALICE, said)
        fakes.reply(ALICE, 0, "💾")  # the review saved it and said so
        fakes.text(BOB, BOB, BOB_SAYS)  # the script is empty: the fake echoes
        fakes.reply(BOB, 0, "echo: bob here")
        seen = len(fakes.bot_messages(ALICE))
        fakes.command(ALICE, ALICE, "/memory")
        assert FACT in fakes.reply(ALICE, seen, FACT)
    finally:
        code, err = mnemo.stop()
    assert code == 0, err
    assert "serving telegram (polling) with data in PostgreSQL database mnemo_tests on" in err
    first = first_request_with(fakes, said)

    fakes.call(fakes.model.say, "Welcome back, Alice.")
    again = start(fakes, workdir, url, nudge=1000)
    try:
        seen = len(fakes.bot_messages(ALICE))
        fakes.text(ALICE, ALICE, BACK)
        fakes.reply(ALICE, seen, "Welcome back, Alice.")
        resumed = first_request_with(fakes, BACK)
        assert json.dumps(resumed[0], ensure_ascii=False) == json.dumps(
            first[0], ensure_ascii=False
        )  # the same stored prompt, byte for byte
        assert resumed[1] == {"role": "user", "content": said}  # the same session

        add = {"target": "user", "action": "add", "content": LEARNED}
        fakes.call(fakes.model.call_tools, ToolCall("memory", add))
        fakes.call(fakes.model.say, "Saved.")
        seen = len(fakes.bot_messages(ALICE))
        fakes.command(ALICE, ALICE, "/new")
        fakes.reply(ALICE, seen, "fresh session")
        wait_for_entry(again.home, url, LEARNED)  # the extraction of the session /new ended

        fakes.call(fakes.model.say, f"Alice's {ALICE_WORDS[0]} workshop.")  # the recap
        seen = len(fakes.bot_messages(ALICE))
        fakes.command(ALICE, ALICE, f"/recall {ALICE_WORDS[0]}")
        fakes.reply(ALICE, seen, f"Alice's {ALICE_WORDS[0]} workshop.")

        seen = len(fakes.bot_messages(ALICE))
        fakes.command(ALICE, ALICE, "/forget all")
        fakes.reply(ALICE, seen, "/forget all confirm")
        seen = len(fakes.bot_messages(ALICE))
        fakes.command(ALICE, ALICE, "/forget all confirm")
        fakes.reply(ALICE, seen, "Erased everything I held about you")
    finally:
        code, err = again.stop()
    assert code == 0, err

    home = workdir / "data"
    assert not (home / "state.db").exists() and not (home / "memories").exists()
    assert not (home / "skills-private").exists()
    assert files_on_disk(home) == []  # replicas take no data-directory lock
    assert rows_holding(url, ALICE_WORDS) == []
    assert profile(home, url, ALICE_KEY) == ()
    assert asyncio.run(_sessions(home, url, BOB_KEY)) >= 1
    assert rows_holding(url, ("chillies",)) != []  # Bob's words stay

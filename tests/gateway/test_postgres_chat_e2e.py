"""`mnemo chat` with `storage.url` on PostgreSQL: the same bot, nothing on disk.

Two real `mnemo chat` processes, one after the other, against one fake model (in
this process, so its requests can be compared) and one PostgreSQL schema. Ada
talks, a review saves a fact, she restarts, starts afresh (the extraction runs),
recalls, and erases herself; Bob's data, put there before, stays. What is
checked is what the person sees and what the database and the data directory
hold afterwards.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memory_core import (
    NewMessage,
    Operation,
    SearchScope,
    SessionOrigin,
    StorageSettings,
    open_storage,
)
from tests.fakes.base import serving_in_thread
from tests.fakes.openai import FakeOpenAI, ToolCall
from tests.gateway.test_background_e2e import Chat
from tests.timing import wait_until_sync

ROOT = Path(__file__).resolve().parents[2]
USER = "ada"
USER_KEY = f"console-{USER}"
BOB_KEY = "telegram-4242"
TIMEOUT = 30.0
NOTICE = "💾 Memory updated"
ADA_WORDS = ("rooftop", "apiary", "Villeurbanne")  # hers only: nobody else says them
FACT = f"Keeps bees on a {ADA_WORDS[0]} in Lyon"
LEARNED = f"Plan an {ADA_WORDS[1]} in {ADA_WORDS[2]}"
BACK = f"I'm back. I plan an {ADA_WORDS[1]} in {ADA_WORDS[2]}."
BOB_FACT = "Bob plays the oboe"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with serving_in_thread(FakeOpenAI(chunk_size=8)) as server:
        yield server


def chat(tmp_path: Path, model_url: str, database_url: str, nudge: int) -> Chat:
    """A `mnemo chat` on the database (nudge 1: a review after every reply)."""
    config = f"memory: {{nudge_interval: {nudge}}}\nskills: {{creation_nudge_interval: 0}}\n"
    skills = str(ROOT / "skills")
    return Chat(
        tmp_path, model_url, config, MNEMO_DATABASE_URL=database_url, MNEMO_SKILLS_DIR=skills
    )


def settings(tmp_path: Path, url: str) -> StorageSettings:
    return StorageSettings(home=tmp_path / "data", skills_dir=ROOT / "skills", url=url)


async def seed_bob(tmp_path: Path, url: str) -> None:
    """Bob, another person of the same bot, with a memory entry and a conversation."""
    async with open_storage(settings(tmp_path, url)) as storage:
        storage.memory.apply("user", BOB_KEY, [Operation("add", content=BOB_FACT)])
        origin = SessionOrigin(
            session_key="telegram:private:4242",
            source="telegram",
            user_key=BOB_KEY,
            chat_id="4242",
            chat_type="private",
        )
        await storage.sessions.append_message(
            origin=origin,
            message=NewMessage("user", "my oboe reed split again", 1.0e9, platform_message_id="1"),
        )


async def profile(tmp_path: Path, url: str, user_key: str) -> tuple[str, ...]:
    async with open_storage(settings(tmp_path, url)) as storage:
        return storage.memory.read("user", user_key).entries


async def bob_sessions(tmp_path: Path, url: str) -> int:
    async with open_storage(settings(tmp_path, url)) as storage:
        return len(await storage.sessions.list_sessions(SearchScope(user_key=BOB_KEY)))


def wait_for_profile_entry(tmp_path: Path, url: str, entry: str) -> None:
    wait_until_sync(  # polling another process's database: no event to wait on
        lambda: entry in asyncio.run(profile(tmp_path, url, USER_KEY)), TIMEOUT, f"{entry!r} saved"
    )


def rows_holding(url: str, words: tuple[str, ...]) -> list[str]:
    """`table: row` for every row of every table of the test's schema that holds a word."""
    found: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
        for (table,) in tables:
            for word in words:
                rows = conn.execute(
                    f'SELECT t::text FROM "{table}" AS t WHERE t::text ILIKE %s',
                    (f"%{word}%",),
                ).fetchall()
                found += [f"{table}: {row[0][:120]}" for row in rows]
    return found


def files_on_disk(home: Path) -> list[str]:
    return sorted(p.relative_to(home).as_posix() for p in home.rglob("*") if p.is_file())


@pytest.mark.slow  # two real `mnemo chat` processes on PostgreSQL
def test_mnemo_chat_on_postgres_remembers_restarts_recalls_and_forgets_with_nothing_on_disk(
    fake: FakeOpenAI, tmp_path: Path, pg_database: str
) -> None:
    url, model = pg_database, fake.url + "/v1"
    asyncio.run(seed_bob(tmp_path, url))
    said = f"Hi, I'm Ada; I keep bees on a {ADA_WORDS[0]} in Lyon."
    fake.say("Nice to meet you, Ada!")
    fake.call_tools(ToolCall("memory", {"target": "user", "action": "add", "content": FACT}))
    fake.say("Saved.")
    first = chat(tmp_path, model, url, nudge=1)
    try:
        first.type(said)
        first.read_until(NOTICE)
        first.type("/memory")
        first.read_until(FACT)
        first.quit()
    finally:
        first.close()
    before = [r.body["messages"] for r in fake.requests if r.path.endswith("/chat/completions")]

    fake.say("Welcome back, Ada.")
    fake.call_tools(ToolCall("memory", {"target": "user", "action": "add", "content": LEARNED}))
    fake.say("Saved.")  # the extraction /new starts
    second = chat(tmp_path, model, url, nudge=0)  # no review: the script stays in order
    try:
        second.type(BACK)
        second.read_until("Welcome back, Ada.")
        turn = next(
            r.body["messages"]
            for r in fake.requests
            if r.path.endswith("/chat/completions")
            and r.body["messages"][-1] == {"role": "user", "content": BACK}
        )
        # the restart continues the session with the same prompt bytes and history
        assert json.dumps(turn[0], ensure_ascii=False) == json.dumps(
            before[0][0], ensure_ascii=False
        )
        assert [m["content"] for m in turn[1:3]] == [said, "Nice to meet you, Ada!"]
        second.type("/new")
        second.read_until("Started a fresh session.")
        wait_for_profile_entry(tmp_path, url, LEARNED)
        fake.say(f"Ada's bees on the {ADA_WORDS[0]}.")  # the one-line recap
        second.type("/recall bees")
        second.read_until(f"Ada's bees on the {ADA_WORDS[0]}.")
        second.type("/forget all")
        second.read_until("This erases everything I hold about you")
        second.type("/forget all confirm")
        second.read_until("Erased everything I held about you")
        second.type("/memory")
        second.read_until("I don't remember anything about you yet.")
        second.quit()
    finally:
        second.close()

    home = tmp_path / "data"
    assert not (home / "state.db").exists() and not (home / "memories").exists()
    assert files_on_disk(home) == []  # replicas take no data-directory lock
    assert rows_holding(url, ADA_WORDS) == []
    assert asyncio.run(profile(tmp_path, url, BOB_KEY)) == (BOB_FACT,)
    assert asyncio.run(bob_sessions(tmp_path, url)) == 1

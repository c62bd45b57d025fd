"""Replicas on one PostgreSQL share the pending choices and the /forget all requests: what
one replica offered, another honours, once, for that person only, by wall-clock time."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.app import Services, open_services
from gateway.commands.choices import CHOICES_DOCUMENT, PendingChoices
from gateway.commands.erase import ERASURES_DOCUMENT, PendingErasures
from gateway.config import load_config
from gateway.conversation import Conversations
from gateway.errors import ChoiceRefusedError
from gateway.messages import CHOICE_PREFIX
from gateway.shared_state import SharedJson, token_digest
from memory_core import Operation, StorageSettings, open_storage
from tests.clock import Clock
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import SKILLS, private, serving
from tests.gateway.sinks import ListSink

ALICE, BOB = "alice", "bob"
OPTIONS = [("first", "one"), ("second", "two")]


@contextlib.asynccontextmanager
async def two_replicas(
    pg_database: str, tmp_path: Path
) -> AsyncIterator[tuple[tuple[Services, Conversations], tuple[Services, Conversations]]]:
    """Two full stacks, each from its own data dir, on one database."""
    async with contextlib.AsyncExitStack() as stack:
        model = await stack.enter_async_context(FakeOpenAI(echo_when_idle=True))
        built = []
        for name in ("a", "b"):
            env = {
                "OPENAI_BASE_URL": model.url + "/v1",
                "MNEMO_HOME": str(tmp_path / name),
                "MNEMO_SKILLS_DIR": str(SKILLS),
                "MNEMO_DATABASE_URL": pg_database,
            }
            services = await stack.enter_async_context(
                open_services(load_config(None, environ=env))
            )
            conversations = serving(services)
            stack.push_async_callback(conversations.close)
            built.append((services, conversations))
        yield built[0], built[1]


async def say(conversations: Conversations, text: str, user: str) -> ListSink:
    sink = ListSink()
    await conversations.handle(private(text, user), sink)
    return sink


async def press(conversations: Conversations, payload: str, user: str) -> str:
    sink = ListSink()
    await conversations.choose(private("", user), payload, sink)
    return sink.replies[-1]


def entries(services: Services, user: str) -> tuple[str, ...]:
    return services.memory.read("user", f"telegram-{user}").entries


async def test_forget_all_asked_on_one_replica_is_confirmed_on_the_other(
    pg_database: str, tmp_path: Path
) -> None:
    async with two_replicas(pg_database, tmp_path) as ((a, on_a), (b, on_b)):
        for user in (ALICE, BOB):
            a.memory.apply("user", f"telegram-{user}", [Operation("add", content=f"{user} x")])
        assert (
            (await say(on_b, "/forget all confirm", ALICE))
            .replies[-1]
            .startswith("There is no /forget all waiting")
        )
        asked = await say(on_a, "/forget all", ALICE)
        assert "press the button" in asked.replies[-1] and len(asked.buttons) == 1
        await say(on_a, "/forget all", BOB)  # Bob asks too, and never confirms
        # Bob's confirmation is his own: it erases him, never Alice
        done = await say(on_b, "/forget all confirm", ALICE)
        assert done.replies[-1].startswith("Erased everything I held about you: 1 memory entry")
        assert entries(a, ALICE) == () and entries(b, BOB) == ("bob x",)
        # her button went with her erasure; pressing it now erases nothing
        assert "not valid any more" in await press(on_b, asked.buttons[0].payload, ALICE)
        assert (
            "no /forget all waiting" in (await say(on_a, "/forget all confirm", ALICE)).replies[-1]
        )
        assert len(PendingErasures(document=b.documents(ERASURES_DOCUMENT))) == 1  # Bob's
        assert entries(b, BOB) == ("bob x",)


async def test_a_settings_button_offered_on_one_replica_works_once_on_the_other(
    pg_database: str, tmp_path: Path
) -> None:
    async with two_replicas(pg_database, tmp_path) as ((_, on_a), (b, on_b)):
        shown = await say(on_a, "/settings", ALICE)
        off = next(c for c in shown.buttons if c.label == "Notices: off")
        assert "someone else" in await press(on_b, off.payload, BOB)  # not Bob's to press
        assert await press(on_b, off.payload, ALICE) == (
            "Background notices: off (nothing is said when I learn something)."
        )
        assert b.locales.settings is not None
        assert b.locales.settings.read(f"telegram-{ALICE}").notices == "off"
        assert "not valid any more" in await press(on_a, off.payload, ALICE)  # used up
        assert b.locales.settings.read(f"telegram-{BOB}").empty


async def test_the_shared_table_keeps_digests_expires_by_wall_clock_and_stays_small(
    pg_database: str, tmp_path: Path
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        docs = []
        for n in range(2):
            settings = StorageSettings(home=tmp_path / f"r{n}", skills_dir=SKILLS, url=pg_database)
            docs.append((await stack.enter_async_context(open_storage(settings))).document)
        clock = Clock(2_000_000_000.0)
        a = PendingChoices(ttl=600, clock=clock, document=docs[0](CHOICES_DOCUMENT))
        b = PendingChoices(ttl=600, clock=clock, document=docs[1](CHOICES_DOCUMENT))
        first, second = a.offer("telegram-1", "forget", OPTIONS, "v1")
        row = docs[1](CHOICES_DOCUMENT).read()
        assert row is not None and "first" in row
        for choice in (first, second):  # a copy of the row names no payload
            assert choice.payload.removeprefix(CHOICE_PREFIX) not in row
        with pytest.raises(ChoiceRefusedError, match="someone else"):
            b.take(first.payload, "telegram-2")
        assert b.take_numbered("telegram-1", "forget", 2).value == "two"
        with pytest.raises(ChoiceRefusedError, match="not valid"):
            a.take(second.payload, "telegram-1")  # its sibling went with it
        old, _ = a.offer("telegram-1", "forget", OPTIONS, "v2")
        a.offer("telegram-2", "forget", OPTIONS, "v2")
        clock.now += 601
        with pytest.raises(ChoiceRefusedError, match="expired"):
            b.take(old.payload, "telegram-1")
        b.offer("telegram-3", "forget", OPTIONS, "v3")  # purges telegram-2's expired offer
        assert len(a) == 2
        alone, _ = a.offer("telegram-1", "forget", OPTIONS, "v4")
        both = await asyncio.gather(  # pressed on both replicas at once: spent once
            *(asyncio.to_thread(t.take, alone.payload, "telegram-1") for t in (a, b)),
            return_exceptions=True,
        )
        assert sorted(type(r).__name__ for r in both) == ["ChoiceRefusedError", "PendingChoice"]
        erasures_a = PendingErasures(clock=clock, document=docs[0](ERASURES_DOCUMENT))
        erasures_b = PendingErasures(clock=clock, document=docs[1](ERASURES_DOCUMENT))
        erasures_a.request("telegram-1")
        clock.now += 601
        assert erasures_b.take("telegram-1") is not None  # expired, for every replica
        erasures_a.request("telegram-2")
        assert erasures_b.take("telegram-2") is None and erasures_a.take("telegram-2")


async def test_on_sqlite_the_tables_stay_in_the_process(services: Services) -> None:
    conversations = serving(services)
    assert services.documents is None
    asked = await say(conversations, "/forget all", ALICE)
    assert "press the button" in asked.replies[-1]
    assert not [p for p in services.config.home.rglob("*") if p.name.endswith(".json")]


async def test_an_approval_list_stands_beside_command_lists_on_every_replica(
    pg_database: str, tmp_path: Path
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        docs = []
        for n in range(2):
            settings = StorageSettings(home=tmp_path / f"r{n}", skills_dir=SKILLS, url=pg_database)
            docs.append((await stack.enter_async_context(open_storage(settings))).document)
        # a table written before lists had keys: its one list per person still holds
        legacy = {
            "offers": {
                "telegram-1": {
                    "command": "forget",
                    "choices": [[token_digest("old"), "first", "one", "v0", 4e9]],
                }
            }
        }
        with SharedJson(docs[0](CHOICES_DOCUMENT)).changing() as state:
            state.update(legacy)
        a = PendingChoices(document=docs[0](CHOICES_DOCUMENT))
        b = PendingChoices(document=docs[1](CHOICES_DOCUMENT))
        approve, _ = a.offer("telegram-1", "memory", OPTIONS, "pending", key="batch-1")
        assert b.take(CHOICE_PREFIX + "old", "telegram-1").value == "one"
        b.offer("telegram-1", "settings", OPTIONS, "v1")  # a command's list, on the other
        with pytest.raises(ChoiceRefusedError, match="someone else"):
            a.take(approve.payload, "telegram-2")
        assert a.take(approve.payload, "telegram-1").value == "one"
        with pytest.raises(ChoiceRefusedError, match="not valid"):
            b.take(approve.payload, "telegram-1")  # spent, for every replica
        assert a.take_numbered("telegram-1", "settings", 2).value == "two"
        assert len(b) == 0

"""/memory through `Conversations` (list sink, fake model) and through the console."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.app import Services, open_services
from gateway.config import load_config
from gateway.conversation import Conversations
from gateway.messages import InboundMessage
from gateway.service import run_console
from memory_core import FileMemoryStore, Operation
from tests.fakes.base import serving_in_thread
from tests.fakes.openai import FakeOpenAI, ToolCall
from tests.gateway.serving import SKILLS, config_for, serving
from tests.gateway.sinks import ListSink

ADMIN = "9"


@pytest.fixture
async def services(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    config = config_for(fake.url, tmp_path / "data", file_text=f'admins: ["telegram:{ADMIN}"]\n')
    async with open_services(config) as opened:
        yield opened


def add(memory: FileMemoryStore, target: str, user_key: str | None, *entries: str) -> None:
    memory.apply(target, user_key, [Operation("add", content=e) for e in entries])  # type: ignore[arg-type]


async def say(conversations: Conversations, text: str, user: str) -> str:
    sink = ListSink()
    await conversations.handle(
        InboundMessage(
            platform="telegram", chat_id=user, chat_type="private", user_id=user, text=text
        ),
        sink,
    )
    return sink.replies[-1]


async def test_entries_are_numbered_with_usage(services: Services, fake: FakeOpenAI) -> None:
    add(services.memory, "user", "telegram-42", "Ada lives in Leeds", "Ada is vegetarian")
    add(services.memory, "memory", None, "The office closes at six")
    reply = await say(serving(services), "/memory", "42")
    chars = len("Ada lives in Leeds") + len("\n§\n") + len("Ada is vegetarian")
    assert f"What I remember about you (2% — {chars}/1,375 chars)" in reply
    today = datetime.now(UTC).date().isoformat()
    assert (
        f"1. Ada lives in Leeds (the operator, {today})\n"
        f"2. Ada is vegetarian (the operator, {today})"
    ) in reply
    assert "office" not in reply and "MEMORY.md" not in reply  # not an admin
    assert fake.requests == []


async def test_admins_also_see_shared_memory_numbered_on_its_own(services: Services) -> None:
    add(services.memory, "user", f"telegram-{ADMIN}", "Grace runs the server")
    add(services.memory, "memory", None, "The office closes at six", "Backups run nightly")
    reply = await say(serving(services), "/memory", ADMIN)
    assert "1. Grace runs the server" in reply
    shared = reply.split("MEMORY.md", 1)[1]
    assert "/2,200 chars" in shared
    today = datetime.now(UTC).date().isoformat()
    assert (
        f"1. The office closes at six (the operator, {today})\n"
        f"2. Backups run nightly (the operator, {today})"
    ) in shared


async def test_admins_see_each_shared_entrys_origin_and_date(
    services: Services, fake: FakeOpenAI
) -> None:
    add(services.memory, "memory", None, "The office closes at six")
    conversations = serving(services)
    fake.call_tools(
        ToolCall("memory", {"target": "memory", "action": "add", "content": "Backups run nightly"})
    )
    fake.say("Noted for everyone.")
    await say(conversations, "backups run nightly, note it for all", ADMIN)
    path = services.memory.path("memory")
    path.write_text(path.read_text().rstrip("\n") + "\n§\nThe printer is on floor two\n")

    shared = (await say(conversations, "/memory", ADMIN)).split("MEMORY.md", 1)[1]

    today = datetime.now(UTC).date().isoformat()
    assert (
        f"1. The office closes at six (the operator, {today})\n"
        f"2. Backups run nightly (an admin, {today})\n"
        "3. The printer is on floor two (the operator, edited by hand on disk)"
    ) in shared
    assert f"telegram-{ADMIN}" not in shared  # which admin wrote it is not shown
    assert "MEMORY.md" not in await say(conversations, "/memory", "42")  # not an admin


async def test_nothing_remembered_is_said_plainly(services: Services) -> None:
    reply = await say(serving(services), "/memory", "42")
    assert reply == "I don't remember anything about you yet."


async def test_one_persons_memory_never_shows_anothers(services: Services) -> None:
    add(services.memory, "user", "telegram-77", "Bob keeps bees")
    reply = await say(serving(services), "/memory", "42")
    assert "bees" not in reply


@pytest.fixture
def threaded_fake() -> Iterator[FakeOpenAI]:
    with serving_in_thread(FakeOpenAI(chunk_size=4)) as server:
        yield server


def test_console_memory_shows_the_profile_and_shared_memory(
    threaded_fake: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "data"
    add(FileMemoryStore(home), "user", "console-ada", "Ada lives in Leeds")
    add(FileMemoryStore(home), "memory", None, "The office closes at six")
    env = {"OPENAI_BASE_URL": threaded_fake.url + "/v1", "MNEMO_HOME": str(home)}
    config = load_config(None, environ={**env, "MNEMO_SKILLS_DIR": str(SKILLS)})
    out = io.StringIO()
    run_console(config, stdin=io.StringIO("/memory\n"), stdout=out, user_id="ada")
    assert "1. Ada lives in Leeds" in out.getvalue()
    assert "1. The office closes at six" in out.getvalue()  # the console is the operator
    assert threaded_fake.requests == []

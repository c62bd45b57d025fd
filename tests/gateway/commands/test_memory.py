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
from gateway.delivery.literal import literal
from gateway.messages import InboundMessage
from gateway.service import run_console
from memory_core import Evidence, FileMemoryStore, Operation, Origin
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
        f"1. Ada lives in Leeds (the operator, {today}) †\n"
        f"2. Ada is vegetarian (the operator, {today}) †\n"
        "† keeps no evidence: written by the operator, by hand, or before evidence was kept."
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


SAID = (Evidence(31, "I moved to Leeds in May"), Evidence(32, "Leeds, near the canal"))
ODD = "Ada writes 2*3*4 and __init__.py, " + "and keeps going " * 17 + "to the end"


def write(services: Services, text: str, origin: Origin, evidence: tuple[Evidence, ...]) -> None:
    op = Operation("add", content=text, evidence=evidence)
    services.memory.apply("user", "telegram-42", [op], origin)


async def test_only_entries_without_evidence_are_marked(services: Services) -> None:
    write(services, "Ada lives in Leeds", Origin("person", 1), SAID)
    conversations = serving(services)
    grounded = await say(conversations, "/memory", "42")
    assert "1. Ada lives in Leeds (you, " in grounded
    assert "†" not in grounded  # no mark, no legend
    add(services.memory, "user", "telegram-42", "Ada is vegetarian")
    listing = (await say(conversations, "/memory", "42")).splitlines()
    assert listing[1].endswith(")") and listing[2].endswith(") †")
    assert listing[3].startswith("† keeps no evidence")


async def test_why_shows_the_entry_whole_its_writer_and_the_words_it_rests_on(
    services: Services, fake: FakeOpenAI
) -> None:
    write(services, "Ada lives in Leeds", Origin("person", 1), SAID)
    write(services, ODD, Origin("review", 1), (Evidence(33, "I write 2*3*4 in __init__.py"),))
    conversations = serving(services)
    today = datetime.now(UTC).date().isoformat()
    assert await say(conversations, "/memory why 1", "42") == (
        "Entry 1, as I keep it:\n"
        "Ada lives in Leeds\n"
        f"Written by you ({today}).\n"
        "It rests on these words of yours:\n"
        "- “I moved to Leeds in May” (message 31)\n"
        "- “Leeds, near the canal” (message 32)"
    )
    odd = await say(conversations, "/memory why 2", "42")
    assert len(ODD) > 300 and literal(ODD) in odd.splitlines()  # whole, and shown as written
    assert "- “I write 2\\*3\\*4 in \\_\\_init\\_\\_.py” (message 33)" in odd
    assert f"2. {literal(ODD)} (learned in the background (review), {today})" in await say(
        conversations, "/memory", "42"
    )
    assert fake.requests == []


async def test_why_without_evidence_says_why_there_is_none(services: Services) -> None:
    add(services.memory, "user", "telegram-42", "Ada is vegetarian")
    write(services, "Ada keeps bees", Origin("person", 1), ())
    path = services.memory.path("user", "telegram-42")
    path.write_text(path.read_text() + "§\nAda sings\n")
    conversations = serving(services)
    why = [await say(conversations, f"/memory why {n}", "42") for n in (1, 2, 3)]
    assert why[0].endswith("No evidence: it was written by the operator.")
    assert why[1].endswith("No evidence: it was written before evidence was kept.")
    assert why[2].splitlines()[1:] == [
        "Ada sings",
        "Written by the operator (edited by hand on disk).",
        "No evidence: it was written by hand on disk.",
    ]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ("", "Send /memory why N with the number of an entry"),
        ("two", "Send /memory why N with the number of an entry"),
        ("#1", "Send /memory why N with the number of an entry"),
        ("9" * 50, "Send /memory why N with the number of an entry"),
        ("3", "There is no entry 3: I hold 1 about you, numbered 1 to 1 by /memory."),
        ("0", "There is no entry 0: I hold 1 about you"),
    ],
)
async def test_why_with_a_bad_number_gets_one_line(
    services: Services, args: str, expected: str
) -> None:
    add(services.memory, "user", "telegram-42", "Ada is vegetarian")
    reply = await say(serving(services), f"/memory why {args}".strip(), "42")
    assert expected in reply and "\n" not in reply
    nothing = await say(serving(services), "/memory why 1", "77")
    assert nothing == "I don't remember anything about you yet."

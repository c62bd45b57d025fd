"""/forget all + confirmation through `Conversations`, the console and a real `mnemo chat`.

Two people talk to the bot (real state.db, USER.md files, skills); one erases
everything. A byte scan of every file under the data directory (state.db, its
WAL and FTS shadow tables included) must find none of that person's words, a
search for them as anyone finds nothing, and the other person keeps all of theirs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.app import Services
from gateway.commands.erase import PendingErasures
from gateway.config import load_config
from gateway.conversation import Conversations
from gateway.messages import InboundMessage
from gateway.service import run_console
from memory_core import (
    FileMemoryStore,
    MemoryManager,
    MemoryProvider,
    Operation,
    Origin,
    PendingChanges,
    Proposal,
    SearchScope,
)
from memory_core.file_memory.pending import PENDING_FILE
from tests.clock import Clock
from tests.fakes.base import serving_in_thread, wait_until
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall
from tests.gateway.processes import run_mnemo
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink
from tests.timing import scaled

SKILLS = Path(__file__).resolve().parents[3] / "skills"
ADA, BOB = "42", "77"
ADA_WORDS = ("zanzibarquokka", "quixotrambler", "fjordwhistle", "plumbobcathedral")
BOB_WORDS = ("bobsledmarmalade", "hivequartermaster")


class Keeper(MemoryProvider):
    """An external provider with data of its own about people."""

    name = "keeper"

    def __init__(self, data: dict[str, str]) -> None:
        self.data = data

    async def erase_user(self, user_key: str) -> None:
        self.data.pop(user_key, None)


def message(text: str, user: str = ADA) -> InboundMessage:
    return InboundMessage(
        platform="telegram", chat_id=user, chat_type="private", user_id=user, text=text
    )


async def say(conversations: Conversations, text: str, user: str = ADA) -> ListSink:
    sink = ListSink()
    await conversations.handle(message(text, user), sink)
    return sink


async def fill(
    services: Services,
    fake: FakeOpenAI,
    conversations: Conversations,
    user: str,
    words: tuple[str, ...],
) -> None:
    """USER.md entries, a private skill, and two turns in which the model echoes their words."""
    key = f"telegram-{user}"
    services.memory.apply("user", key, [Operation("add", content=f"likes {w}") for w in words])
    services.skills.create(
        "habits", f"---\nname: habits\ndescription: d\n---\n# Steps\n{words[0]}\n", user_key=key
    )
    for word in words[:2]:
        fake.say(f"so you like {word}")
        await say(conversations, f"tell me about {word}", user)


def files_holding(root: Path, words: tuple[str, ...]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}:{w}" for w in words if w.encode() in data]
    return found


async def anyone_finds(services: Services, words: tuple[str, ...]) -> bool:
    for key in (f"telegram-{ADA}", f"telegram-{BOB}"):
        for word in words:
            if await services.sessions.search(word, SearchScope(user_key=key)):
                return True
    return False


async def test_forget_all_then_confirm_erases_one_person_to_the_last_byte(
    services: Services, fake: FakeOpenAI
) -> None:
    keeper = {f"telegram-{ADA}": "ada's facts", f"telegram-{BOB}": "bob's facts"}
    services = dataclasses.replace(
        services, new_manager=lambda: MemoryManager(external=Keeper(keeper))
    )
    conversations = serving(services)
    await fill(services, fake, conversations, ADA, ADA_WORDS)
    await fill(services, fake, conversations, BOB, BOB_WORDS)
    home = services.config.home
    assert files_holding(home, ADA_WORDS) and await anyone_finds(services, ADA_WORDS)
    requests = len(fake.requests)

    asked = await say(conversations, "/forget all")
    assert "4 memory entries, 1 session (4 messages) and 1 skill" in asked.replies[-1]
    assert "/forget all confirm" in asked.replies[-1] and "10 minutes" in asked.replies[-1]
    assert [b.label for b in asked.buttons] == ["Yes, erase everything"]
    assert services.memory.read("user", f"telegram-{ADA}").entries  # nothing erased yet

    done = (await say(conversations, "/forget all confirm")).replies[-1]

    assert "Erased everything I held about you: 4 memory entries, 1 session (4 messages)" in done
    assert files_holding(home, ADA_WORDS) == []
    assert not await anyone_finds(services, ADA_WORDS)
    assert not (home / "memories" / "users" / f"telegram-{ADA}").exists()
    assert not (home / "skills-private" / f"telegram-{ADA}").exists()
    assert keeper == {f"telegram-{BOB}": "bob's facts"}
    assert conversations.sessions.open_count == 1  # Bob's session stays cached; Ada's was dropped
    assert len(fake.requests) == requests  # commands never reach the model
    # Bob is untouched
    assert len(services.memory.read("user", f"telegram-{BOB}").entries) == 2
    assert sorted(files_holding(home, BOB_WORDS))
    hits = await services.sessions.search(BOB_WORDS[0], SearchScope(user_key=f"telegram-{BOB}"))
    assert len(hits) == 1
    # Ada starts afresh
    fake.say("nice to meet you")
    assert (await say(conversations, "hello")).replies[-1] == "nice to meet you"


async def test_forget_all_erases_the_changes_staged_for_her_approval(
    services: Services, fake: FakeOpenAI
) -> None:
    conversations = serving(services)
    pending = PendingChanges(services.memory)
    for user, word in ((ADA, ADA_WORDS[3]), (BOB, BOB_WORDS[1])):
        proposal = Proposal("add", f"likes {word}", None, "it contains a link")
        pending.stage(f"telegram-{user}", [proposal], Origin("review"), pending.new_batch())
    assert services.memory.peek_record(f"telegram-{ADA}", PENDING_FILE) is not None

    await say(conversations, "/forget all")
    done = (await say(conversations, "/forget all confirm")).replies[-1]

    assert "Erased everything I held about you" in done
    assert services.memory.peek_record(f"telegram-{ADA}", PENDING_FILE) is None
    assert files_holding(services.config.home, (ADA_WORDS[3],)) == []
    assert [c.content for c in pending.list(f"telegram-{BOB}")] == [f"likes {BOB_WORDS[1]}"]


async def test_the_button_confirms_too(services: Services, fake: FakeOpenAI) -> None:
    conversations = serving(services)
    await fill(services, fake, conversations, ADA, ADA_WORDS)
    asked = await say(conversations, "/forget all")
    sink = ListSink()
    await conversations.choose(message(""), asked.buttons[0].payload, sink)
    assert sink.replies[-1].startswith("Erased everything I held about you: 4 memory entries")
    assert files_holding(services.config.home, ADA_WORDS) == []


async def test_confirm_without_request_after_expiry_or_by_another_person_erases_nothing(
    services: Services, fake: FakeOpenAI
) -> None:
    clock = Clock()
    conversations = serving(services, erasures=PendingErasures(clock=clock))
    await fill(services, fake, conversations, ADA, ADA_WORDS)
    await fill(services, fake, conversations, BOB, BOB_WORDS)
    ada_files = files_holding(services.config.home, ADA_WORDS)

    reply = (await say(conversations, "/forget all confirm")).replies[-1]
    assert "no /forget all waiting for your confirmation" in reply

    asked = await say(conversations, "/forget all")
    clock.now += 601
    assert "expired" in (await say(conversations, "/forget all confirm")).replies[-1]

    asked = await say(conversations, "/forget all")  # a fresh request
    bob = await say(conversations, "/forget all confirm", BOB)  # Bob has asked nothing
    assert "no /forget all waiting" in bob.replies[-1]
    pressed = ListSink()
    await conversations.choose(message("", BOB), asked.buttons[0].payload, pressed)
    assert "offered to someone else" in pressed.replies[-1]
    assert files_holding(services.config.home, ADA_WORDS) == ada_files  # all still there
    assert files_holding(services.config.home, BOB_WORDS)

    clock.now += 599  # within ten minutes of the fresh request
    done = (await say(conversations, "/forget all confirm")).replies[-1]
    assert done.startswith("Erased everything")
    assert files_holding(services.config.home, ADA_WORDS) == []
    assert "no /forget all waiting" in (await say(conversations, "/forget all confirm")).replies[-1]


# -- the console ------------------------------------------------------------------------------


@pytest.fixture
def threaded_fake() -> Iterator[FakeOpenAI]:
    with serving_in_thread(FakeOpenAI(chunk_size=4)) as server:
        yield server


def test_console_forget_all_and_confirm(
    threaded_fake: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "data"
    store = FileMemoryStore(home)
    store.apply("user", "console-ada", [Operation("add", content=f"likes {ADA_WORDS[0]}")])
    store.apply("user", "console-bob", [Operation("add", content=f"likes {BOB_WORDS[0]}")])
    env = {"OPENAI_BASE_URL": threaded_fake.url + "/v1", "MNEMO_HOME": str(home)}
    config = load_config(None, environ={**env, "MNEMO_SKILLS_DIR": str(SKILLS)})
    threaded_fake.say(f"noted: {ADA_WORDS[1]}")
    out = io.StringIO()
    lines = io.StringIO(f"I love {ADA_WORDS[1]}\n/forget all\n/forget all confirm\n/memory\n")
    run_console(config, stdin=lines, stdout=out, user_id="ada")
    text = out.getvalue()
    assert "1 memory entry, 1 session (2 messages) and 0 skills" in text
    assert "To confirm, send /forget all confirm within" in text  # no button to press
    assert "press the button" not in text and "1. Yes, erase everything" not in text
    assert "Erased everything I held about you" in text
    assert "I don't remember anything about you yet." in text
    assert files_holding(home, ADA_WORDS) == []
    assert list(FileMemoryStore(home).read("user", "console-bob").entries) == [
        f"likes {BOB_WORDS[0]}"
    ]


@pytest.mark.slow  # a real mnemo process, start to exit
def test_mnemo_chat_subprocess_forget_all_end_to_end(tmp_path: Path) -> None:
    home = tmp_path / "d"
    user = "ada"
    FileMemoryStore(home).apply(
        "user", f"console-{user}", [Operation("add", content=f"likes {ADA_WORDS[0]}")]
    )
    typed = f"about {ADA_WORDS[2]}\n/forget all\n/forget all confirm\n"
    result = run_mnemo("chat", typed, home=home, cwd=tmp_path, user=user)
    assert result.returncode == 0, result.stderr
    assert "This erases everything I hold about you: 1 memory entry, 1 session" in result.stdout
    assert "Erased everything I held about you: 1 memory entry, 1 session" in result.stdout
    assert files_holding(home, ADA_WORDS) == []


async def test_forget_all_stops_the_persons_turn_in_flight_in_a_group_and_keeps_nothing(
    services: Services, fake: FakeOpenAI
) -> None:
    """Ada's group turn waits at the model (it would save a memory and a reply) while she
    confirms /forget all in private: after the erasure nothing of hers is left."""
    conversations = serving(services)
    await fill(services, fake, conversations, BOB, BOB_WORDS)  # Bob, beside her, keeps his
    fact = {"target": "user", "action": "add", "content": f"likes {ADA_WORDS[3]}"}
    fake.call_tools(ToolCall("memory", fact))  # what the held turn would do once released
    fake.say(f"noted {ADA_WORDS[3]}")
    fake.fail_next(Fault.stall())
    in_group = InboundMessage(
        platform="telegram", chat_id="-5", chat_type="group", user_id=ADA,
        text=f"remember {ADA_WORDS[2]}", message_id="1",
    )  # fmt: skip
    group_turn = asyncio.create_task(conversations.handle(in_group, ListSink()))
    await wait_until(lambda: fake.stalled == 1)

    await say(conversations, "/forget all")
    done = (await say(conversations, "/forget all confirm")).replies[-1]
    assert "Erased everything I held about you" in done
    await asyncio.wait_for(group_turn, scaled(5))  # it was stopped, not left to finish later
    fake.release()
    await wait_until(lambda: fake.stalled == 0)

    home = services.config.home
    assert files_holding(home, ADA_WORDS) == []
    assert not (home / "memories" / "users" / f"telegram-{ADA}").exists()
    assert await services.sessions.user_session_keys(f"telegram-{ADA}") == []
    assert len(services.memory.read("user", f"telegram-{BOB}").entries) == 2


async def test_a_message_waiting_behind_the_stopped_turn_is_erased_with_the_rest(
    services: Services, fake: FakeOpenAI
) -> None:
    """Ada's follow-up in the group waits for her held turn; she erases everything in
    private meanwhile: the follow-up, sent before the erasure, is not kept either."""
    conversations = serving(services)
    fake.fail_next(Fault.stall())

    def in_group(text: str, message_id: str) -> InboundMessage:
        return InboundMessage(
            platform="telegram", chat_id="-5", chat_type="group", user_id=ADA,
            text=text, message_id=message_id,
        )  # fmt: skip

    held = asyncio.create_task(conversations.handle(in_group(ADA_WORDS[0], "1"), ListSink()))
    await wait_until(lambda: fake.stalled == 1)
    queued = asyncio.Event()
    follow_up = ListSink()
    waiting = asyncio.create_task(
        conversations.handle(in_group(ADA_WORDS[1], "2"), follow_up, queued.set)
    )
    await asyncio.wait_for(queued.wait(), scaled(5))

    await say(conversations, "/forget all")
    await say(conversations, "/forget all confirm")
    await asyncio.wait_for(asyncio.gather(held, waiting), scaled(5))
    fake.release()
    await wait_until(lambda: fake.stalled == 0)
    assert follow_up.replies == [
        "(everything I held about you was just erased, this message with it)"
    ]
    assert files_holding(services.config.home, ADA_WORDS) == []
    assert await services.sessions.user_session_keys(f"telegram-{ADA}") == []

"""/forget through `Conversations` (list sink, fake model) and through the console.

The fake model must see no request: commands never reach it. USER.md files are
real files under a temporary data directory, changed through the real store.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gateway.app import Services, open_services
from gateway.commands.choices import PendingChoices
from gateway.commands.memory import forget_command
from gateway.commands.registry import CommandContext
from gateway.config import load_config
from gateway.conversation import Conversations
from gateway.messages import InboundMessage, MessageIdentity
from gateway.service import run_console
from memory_core import Evidence, FileMemoryStore, Operation, Origin
from tests.fakes.base import serving_in_thread
from tests.fakes.openai import FakeOpenAI
from tests.gateway.processes import run_mnemo
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink

SKILLS = Path(__file__).resolve().parents[3] / "skills"
ADA = "42"
BOB = "77"
ENTRIES = [
    "Ada drinks oat milk coffee every morning",
    "Ada's sister runs a coffee roastery in Leeds",
    "Ada lives in Manchester",
]


@pytest.fixture
async def services(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    env = {
        "OPENAI_BASE_URL": fake.url + "/v1",
        "MNEMO_HOME": str(tmp_path / "data"),
        "MNEMO_SKILLS_DIR": str(SKILLS),
    }
    async with open_services(load_config(None, environ=env)) as opened:
        seed(opened.memory, f"telegram-{ADA}", ENTRIES)
        seed(opened.memory, f"telegram-{BOB}", ["Bob keeps bees in Leeds"])
        yield opened


def seed(memory: FileMemoryStore, user_key: str, entries: list[str]) -> None:
    memory.apply("user", user_key, [Operation("add", content=e) for e in entries])


def entries(services: Services, user: str = ADA) -> list[str]:
    return list(services.memory.read("user", f"telegram-{user}").entries)


def message(text: str, user: str = ADA) -> InboundMessage:
    return InboundMessage(
        platform="telegram", chat_id=user, chat_type="private", user_id=user, text=text
    )


async def say(conversations: Conversations, text: str, user: str = ADA) -> str:
    sink = ListSink()
    await conversations.handle(message(text, user), sink)
    return sink.replies[-1]


async def test_one_match_is_removed_and_echoed(services: Services, fake: FakeOpenAI) -> None:
    conversations = serving(services)
    reply = await say(conversations, "/forget MANCHESTER")
    assert reply.startswith(
        "Forgotten: Ada lives in Manchester\nThat is for good: no undo brings it back. ("
    )
    assert entries(services) == ENTRIES[:2]
    assert fake.requests == []


async def test_a_forgotten_entry_is_in_no_file_and_no_undo_brings_it_back(
    services: Services,
) -> None:
    conversations = serving(services)
    await say(conversations, "/forget manchester")
    undone = await say(conversations, "/memory undo")  # the latest change it may revert
    assert undone == f"Undone #2: removed “{ENTRIES[1]}”."
    assert await say(conversations, "/memory undo 3") == (
        "Change 3 can't be undone: it was about an entry you asked me to forget, and that "
        "is for good."
    )
    assert entries(services) == ENTRIES[:1]
    home = services.config.home
    holding = [p for p in home.rglob("*") if p.is_file() and b"in Manchester" in p.read_bytes()]
    assert holding == []


class Sessions:
    """The open sessions, as far as /forget uses them: whose prompts were rebuilt."""

    def __init__(self) -> None:
        self.refreshed: list[str] = []

    async def end(self, session_key: str, reason: str) -> None: ...

    async def drop_person(self, user_key: str) -> None: ...

    async def refresh_prompts(self, user_key: str) -> None:
        self.refreshed.append(user_key)

    async def stop(self, session_key: str) -> bool:
        return False


async def test_the_words_it_rested_on_are_redacted_before_the_prompts_are_rebuilt(
    services: Services,
) -> None:
    key = f"telegram-{ADA}"
    said = (Evidence(11, "I've lived in Manchester since May"), Evidence(12, "Manchester!"))
    removal = [Operation("remove", old_text="Manchester")]
    services.memory.apply("user", key, removal)
    grounded = Operation("add", content="Ada lives in Manchester", evidence=said)
    services.memory.apply("user", key, [grounded], Origin("person", 3))
    calls: list[tuple[object, ...]] = []
    sessions = Sessions()

    async def forget_words(user_key: str, ids: tuple[int, ...], texts: tuple[str, ...]) -> None:
        calls.append((user_key, ids, texts, list(sessions.refreshed)))

    command = forget_command(
        services.memory, PendingChoices(), sessions, lambda k: calls.append(("export", k)),
        forget_words,
    )  # fmt: skip
    msg = message("/forget 3")
    ctx = CommandContext(msg, MessageIdentity.of(msg), "3", False, services.locales.of_message(msg))
    reply = await command.handler(ctx)
    assert reply.text.startswith("Forgotten: Ada lives in Manchester\n")
    assert calls == [
        (key, (11, 12), ("Ada lives in Manchester",), []),  # before any prompt is rebuilt
        ("export", key),
    ]
    assert sessions.refreshed == [key]


async def test_a_number_from_memory_removes_that_entry(
    services: Services, fake: FakeOpenAI
) -> None:
    conversations = serving(services)
    assert "2. Ada's sister" in await say(conversations, "/memory")
    reply = await say(conversations, "/forget 2")
    assert "Forgotten: Ada's sister runs a coffee roastery in Leeds" in reply
    assert entries(services) == [ENTRIES[0], ENTRIES[2]]
    assert fake.requests == []


async def test_several_matches_are_offered_and_only_the_pressed_one_goes(
    services: Services, fake: FakeOpenAI
) -> None:
    conversations = serving(services)
    sink = ListSink()
    await conversations.handle(message("/forget coffee"), sink)
    assert "2 entries contain “coffee”" in sink.replies[0]
    assert "/forget #1" in sink.replies[0]
    assert f"1. {ENTRIES[0]}" in sink.replies[0] and f"2. {ENTRIES[1]}" in sink.replies[0]
    assert entries(services) == ENTRIES  # nothing removed yet
    payload = sink.buttons[1].payload
    await conversations.choose(message("", ADA), payload, sink)
    assert f"Forgotten: {ENTRIES[1]}" in sink.replies[1]
    assert entries(services) == [ENTRIES[0], ENTRIES[2]]
    assert fake.requests == []


async def test_a_numbered_text_answer_picks_from_the_list(services: Services) -> None:
    conversations = serving(services)
    await say(conversations, "/forget coffee")
    reply = await say(conversations, "/forget #1")
    assert f"Forgotten: {ENTRIES[0]}" in reply
    assert entries(services) == ENTRIES[1:]
    again = await say(conversations, "/forget #2")  # the list was used up by the first pick
    assert "no open list" in again
    assert entries(services) == ENTRIES[1:]


async def test_a_stale_choice_is_refused_and_nothing_is_removed(services: Services) -> None:
    conversations = serving(services)
    payload = (await offered(conversations, "/forget coffee"))[0]
    # USER.md changes between the offer and the pick: entry 1 is now a different entry.
    services.memory.apply("user", f"telegram-{ADA}", [Operation("remove", old_text=ENTRIES[0])])
    services.memory.apply("user", f"telegram-{ADA}", [Operation("add", content="Ada likes tea")])
    before = entries(services)
    sink = ListSink()
    await conversations.choose(message("", ADA), payload, sink)
    assert "changed since that list was made" in sink.replies[0]
    assert entries(services) == before


async def test_a_stale_numbered_answer_is_refused_too(services: Services) -> None:
    conversations = serving(services)
    await say(conversations, "/forget coffee")
    seed(services.memory, f"telegram-{ADA}", ["Ada plays the cello"])
    before = entries(services)
    reply = await say(conversations, "/forget #2")
    assert "removed nothing" in reply
    assert entries(services) == before


async def test_forged_replayed_and_foreign_payloads_change_nothing(services: Services) -> None:
    conversations = serving(services)
    first, second = await offered(conversations, "/forget coffee")
    sink = ListSink()
    await conversations.choose(message("", BOB), first, sink)  # pressed by another person
    assert "offered to someone else" in sink.replies[-1]
    await conversations.choose(message("", ADA), "choice:forged-token-000000", sink)
    assert "not valid" in sink.replies[-1]
    await conversations.choose(message("", ADA), "rm -rf /", sink)
    assert "not valid" in sink.replies[-1]
    assert entries(services) == ENTRIES
    assert entries(services, BOB) == ["Bob keeps bees in Leeds"]
    await conversations.choose(message("", ADA), first, sink)  # the owner still can
    assert f"Forgotten: {ENTRIES[0]}" in sink.replies[-1]
    await conversations.choose(message("", ADA), first, sink)  # replayed
    assert "not valid" in sink.replies[-1]
    await conversations.choose(message("", ADA), second, sink)  # its sibling went with it
    assert "not valid" in sink.replies[-1]
    assert entries(services) == ENTRIES[1:]


async def test_bad_input_gets_a_clear_reply_and_changes_nothing(
    services: Services, fake: FakeOpenAI
) -> None:
    conversations = serving(services)
    assert "Tell me what to forget" in await say(conversations, "/forget")
    assert "There is no entry 9: I hold 3" in await say(conversations, "/forget 9")
    assert "There is no entry 0" in await say(conversations, "/forget 0")
    long = await say(conversations, "/forget " + "x" * 10_000)
    assert "10,000 characters" in long and len(long) < 300
    bees = await say(conversations, "/forget bees")  # Bob's entry, not Ada's
    assert "Nothing I remember about you contains “bees”" in bees
    assert entries(services) == ENTRIES
    assert entries(services, BOB) == ["Bob keeps bees in Leeds"]
    assert fake.requests == []


async def test_forget_all_is_not_read_as_text(services: Services) -> None:
    """`/forget all` goes to the erasure command, never matched as text ("calls" holds "all")."""
    seed(services.memory, f"telegram-{ADA}", ["Ada calls her mum on Sundays"])
    before = entries(services)
    conversations = serving(services)
    reply = await say(conversations, "/forget all")
    assert "Forgotten" not in reply  # not "the one entry containing 'all'"
    assert entries(services) == before  # and nothing goes before a confirmation


async def offered(conversations: Conversations, text: str, user: str = ADA) -> list[str]:
    """The payloads of the buttons `text` offers (what a platform sends back when pressed)."""
    sink = ListSink()
    await conversations.handle(message(text, user), sink)
    return [choice.payload for choice in sink.buttons]


# -- the console ------------------------------------------------------------------------------


@pytest.fixture
def threaded_fake() -> Iterator[FakeOpenAI]:
    with serving_in_thread(FakeOpenAI(chunk_size=4)) as server:
        yield server


def test_console_offers_numbered_choices_and_forgets_the_picked_one(
    threaded_fake: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "data"
    seed(FileMemoryStore(home), "console-ada", ENTRIES)
    env = {"OPENAI_BASE_URL": threaded_fake.url + "/v1", "MNEMO_HOME": str(home)}
    config = load_config(None, environ={**env, "MNEMO_SKILLS_DIR": str(SKILLS)})
    out = io.StringIO()
    lines = io.StringIO("/forget coffee\n/forget #2\n/memory\n")
    run_console(config, stdin=lines, stdout=out, user_id="ada")
    text = out.getvalue()
    assert f"1. {ENTRIES[0]}" in text and f"2. {ENTRIES[1]}" in text
    assert f"Forgotten: {ENTRIES[1]}" in text
    assert list(FileMemoryStore(home).read("user", "console-ada").entries) == [
        ENTRIES[0],
        ENTRIES[2],
    ]
    assert threaded_fake.requests == []


@pytest.mark.slow  # a real mnemo process, start to exit
def test_mnemo_chat_subprocess_forgets_end_to_end(tmp_path: Path) -> None:
    home = tmp_path / "d"
    user = "ada"
    seed(FileMemoryStore(home), f"console-{user}", ENTRIES)
    typed = "/forget manchester\n/forget coffee\n/forget #1\n"
    result = run_mnemo("chat", typed, home=home, cwd=tmp_path, user=user)
    assert result.returncode == 0, result.stderr
    assert f"Forgotten: {ENTRIES[2]}" in result.stdout
    assert "2 entries contain “coffee”" in result.stdout
    assert f"Forgotten: {ENTRIES[0]}" in result.stdout
    assert list(FileMemoryStore(home).read("user", f"console-{user}").entries) == [ENTRIES[1]]


async def test_an_unreadable_profile_gets_one_clear_line(
    services: Services, fake: FakeOpenAI
) -> None:
    path = services.memory.path("user", f"telegram-{ADA}")
    path.write_bytes(b"Ada \xff\xfe broken")
    for text in ("/forget coffee", "/memory"):
        reply = await say(serving(services), text)
        assert reply.startswith("I couldn't read or change what I remember about you:")
    assert path.read_bytes() == b"Ada \xff\xfe broken"
    assert fake.requests == []


async def test_in_a_group_the_profile_is_neither_shown_nor_changed(services: Services) -> None:
    conversations = serving(services)
    for text in ("/memory", "/forget manchester", "/forget 1"):
        sink = ListSink()
        group = InboundMessage(
            platform="telegram", chat_id="-100", chat_type="group", user_id=ADA, text=text
        )
        await conversations.handle(group, sink)
        assert "only in a private chat" in sink.replies[0]
        assert "Manchester" not in sink.replies[0]
    assert entries(services) == ENTRIES


async def test_a_forgotten_entry_leaves_the_open_sessions_prompt(
    services: Services, fake: FakeOpenAI
) -> None:
    """The session's prompt was frozen with the entry in it; after /forget the next
    turn's system message no longer holds it, also after a restart (stored prompt)."""
    fake.say("Hello Ada.")
    fake.say("Noted.")
    fake.say("Still here.")
    conversations = serving(services)
    await say(conversations, "hi")
    assert "Ada lives in Manchester" in fake.requests[0].body["messages"][0]["content"]
    assert "Forgotten" in await say(conversations, "/forget Manchester")
    await say(conversations, "what do you know about me?")
    second = fake.requests[1].body["messages"]
    assert "Manchester" not in second[0]["content"]
    assert [m["content"] for m in second[1:3]] == ["hi", "Hello Ada."]  # same session goes on
    await serving(services).handle(message("and now?"), ListSink())  # a restart
    assert "Manchester" not in fake.requests[2].body["messages"][0]["content"]
    # Bob's sessions and prompt are not touched by Ada's /forget.
    assert entries(services, BOB) == ["Bob keeps bees in Leeds"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ("9" * 5000, "far larger than the number of entries"),
        ("#" + "9" * 5000, "far larger than the number of entries"),
        ("0" * 7 + "1", "far larger than the number of entries"),  # bounded by length, read as is
        ("#²", "with the digits 0 to 9"),
        ("²", "with the digits 0 to 9"),
        ("٣", "with the digits 0 to 9"),  # an Arabic-Indic three
        ("３", "with the digits 0 to 9"),  # a fullwidth three
        ("99999", "There is no entry 99999: I hold 3"),
    ],
)
async def test_odd_numbers_get_one_clear_line_and_remove_nothing(
    services: Services, fake: FakeOpenAI, args: str, expected: str
) -> None:
    conversations = serving(services)
    reply = await say(conversations, f"/forget {args}")
    assert expected in reply
    assert "\n" not in reply and len(reply) < 300  # one line; the 5,000 digits not echoed
    assert entries(services) == ENTRIES
    assert fake.requests == []
    assert "Forgotten: Ada lives in Manchester" in await say(conversations, "/forget 3")


async def test_earlier_versions_of_the_entry_are_redacted_from_the_sessions_too(
    services: Services,
) -> None:
    key = f"telegram-{ADA}"
    services.memory.apply("user", key, [Operation("remove", old_text="Manchester")])
    services.memory.apply("user", key, [Operation("add", content="Has a dog called Biscuit")])
    newer = Operation("replace", content="Has a dog named Biscuit", old_text="called Biscuit")
    services.memory.apply("user", key, [newer])
    texts: list[tuple[str, ...]] = []

    async def forget_words(user_key: str, ids: tuple[int, ...], said: tuple[str, ...]) -> None:
        texts.append(said)

    command = forget_command(services.memory, PendingChoices(), Sessions(), None, forget_words)
    msg = message("/forget Biscuit")
    ctx = CommandContext(
        msg, MessageIdentity.of(msg), "Biscuit", False, services.locales.of_message(msg)
    )
    await command.handler(ctx)
    assert texts == [("Has a dog named Biscuit", "Has a dog called Biscuit")]


async def test_a_forget_by_number_withdraws_the_list_that_held_the_entries_text(
    services: Services,
) -> None:
    conversations = serving(services)
    sink = ListSink()
    await conversations.handle(message("/forget coffee"), sink)
    payload = sink.buttons[0].payload
    await conversations.handle(message("/forget 3"), sink)  # another entry, by its number
    assert sink.replies[-1].startswith(f"Forgotten: {ENTRIES[2]}")
    await conversations.choose(message("", ADA), payload, sink)  # the old list is gone
    assert not sink.replies[-1].startswith("Forgotten")
    assert entries(services) == [ENTRIES[0], ENTRIES[1]]

"""/memory history, /memory undo, /memory archive and /recall over the archive, in the chat."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.app import Services, open_services
from gateway.conversation import Conversations
from gateway.messages import InboundMessage
from memory_core import Operation, Origin
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import config_for, serving
from tests.gateway.sinks import ListSink

ADA, BOB = "42", "77"
REVIEW = Origin("review", 1)


@pytest.fixture
async def services(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    config = config_for(fake.url, tmp_path / "data", file_text="memory: {user_char_limit: 150}\n")
    async with open_services(config) as opened:
        yield opened


def add(services: Services, user: str, text: str, origin: Origin) -> None:
    services.memory.apply("user", f"telegram-{user}", [Operation("add", content=text)], origin)


async def say(
    conversations: Conversations,
    text: str,
    user: str = ADA,
    chat_type: str = "private",
    language: str | None = None,
) -> str:
    sink = ListSink()
    chat = user if chat_type == "private" else "-5"
    await conversations.handle(
        InboundMessage(
            platform="telegram",
            chat_id=chat,
            chat_type=chat_type,
            user_id=user,
            text=text,
            language=language,
        ),
        sink,
    )
    return sink.replies[-1]


def entries(services: Services, user: str = ADA) -> tuple[str, ...]:
    return services.memory.read("user", f"telegram-{user}").entries


async def test_memory_lists_origins_history_and_undo(services: Services, fake: FakeOpenAI) -> None:
    add(services, ADA, "Ada keeps bees", Origin("person", 1))
    add(services, ADA, "Ada plays the cello", REVIEW)
    add(services, BOB, "Bob sails a ketch", Origin("person", 2))
    conversations = serving(services)

    listing = await say(conversations, "/memory")
    assert "1. Ada keeps bees (you, " in listing
    assert "2. Ada plays the cello (learned in the background (review), " in listing

    services.memory.apply(
        "user", f"telegram-{ADA}", [Operation("remove", old_text="bees")], Origin("person", 1)
    )
    history = await say(conversations, "/memory history")
    lines = history.splitlines()
    assert lines[1].startswith("#3 ") and "removed “Ada keeps bees” (you)" in lines[1]
    assert "#2 " in lines[2] and "added “Ada plays the cello”" in lines[2]
    assert "ketch" not in history  # Bob's changes are his

    undone = await say(conversations, "/memory undo")
    assert undone == "Undone #3: brought back “Ada keeps bees”."
    assert entries(services) == ("Ada plays the cello", "Ada keeps bees")
    assert "1. Ada plays the cello" in await say(conversations, "/memory")

    removed = await say(conversations, "/memory undo 2")  # the review's add
    assert "removed “Ada plays the cello”" in removed
    assert entries(services) == ("Ada keeps bees",)
    assert entries(services, BOB) == ("Bob sails a ketch",)
    assert "ketch" not in await say(conversations, "/memory history")
    assert fake.requests == []


async def test_a_forgotten_entry_leaves_its_place_in_the_history_and_no_undo(
    services: Services, fake: FakeOpenAI
) -> None:
    add(services, ADA, "Ada keeps bees", Origin("person", 1))
    add(services, ADA, "Ada plays the cello", REVIEW)
    conversations = serving(services)
    reply = await say(conversations, "/forget bees")
    assert reply.startswith("Forgotten: Ada keeps bees\nThat is for good: no undo brings it back.")

    lines = (await say(conversations, "/memory history")).splitlines()
    assert lines[1].startswith("#3 ") and lines[1].endswith("· forgot an entry for good (you)")
    assert "added “Ada plays the cello”" in lines[2]
    assert lines[3].startswith("#1 ") and "a change to an entry since forgotten (you)" in lines[3]
    assert "bees" not in "\n".join(lines)

    for number in ("1", "3"):
        assert await say(conversations, f"/memory undo {number}") == (
            f"Change {number} can't be undone: it was about an entry you asked me to forget, "
            "and that is for good."
        )
    assert entries(services) == ("Ada plays the cello",)
    undone = await say(conversations, "/memory undo")  # the latest it may: the review's add
    assert undone == "Undone #2: removed “Ada plays the cello”."
    assert entries(services) == ()
    assert fake.requests == []


async def test_a_withdrawn_entry_is_labelled_and_undone_like_any_change(
    services: Services,
) -> None:
    add(services, ADA, "Ada lives in Porto", Origin("person", 1))
    removal = [Operation("remove", old_text="Porto")]
    services.memory.apply("user", f"telegram-{ADA}", removal, Origin("withdrawn", 1))
    conversations = serving(services)
    history = (await say(conversations, "/memory history")).splitlines()
    assert history[1].endswith("removed “Ada lives in Porto” (withdrawn: source edited)")
    assert await say(conversations, "/memory undo") == (
        "Undone #2: brought back “Ada lives in Porto”."
    )
    assert "1. Ada lives in Porto (you, " in await say(conversations, "/memory")
    chinese = await say(conversations, "/memory history", language="zh")
    assert "（已撤回：来源已被编辑）" in chinese


async def test_undo_refused_after_a_later_change_says_so_in_one_line(services: Services) -> None:
    add(services, ADA, "Ada keeps bees", REVIEW)
    key = f"telegram-{ADA}"
    services.memory.apply(
        "user", key, [Operation("replace", old_text="bees", content="Ada keeps wasps")]
    )
    conversations = serving(services)
    reply = await say(conversations, "/memory undo 1")
    assert reply == (
        "Change 1 can't be undone: change 2 changed the same entry later (undo that one first)."
    )
    assert entries(services) == ("Ada keeps wasps",)
    assert "nothing was changed" in await say(conversations, "/memory undo two")
    assert "no change 9" in await say(conversations, "/memory undo 9")
    assert await say(conversations, "/memory undo", BOB) == "There is no change left to undo."


async def test_a_full_memory_archives_background_entries_listed_and_recalled(
    services: Services,
) -> None:
    add(services, ADA, "Ada once lived in Lisbon near the river", REVIEW)
    add(services, ADA, "Ada keeps bees on the roof of her building", Origin("person", 1))
    add(services, ADA, "Ada prefers short answers and metric units", Origin("extraction", 1))
    add(services, ADA, "Ada is learning the cello since last spring", Origin("person", 1))
    assert "Lisbon" not in " ".join(entries(services))  # moved out to make room
    conversations = serving(services)

    archive = await say(conversations, "/memory archive")
    assert "- Ada once lived in Lisbon near the river" in archive
    assert "/memory undo 4 brings it back" in archive
    assert "Nothing of yours" in await say(conversations, "/memory archive", BOB)

    recalled = await say(conversations, "/recall lisbon river")
    assert "In what I moved out of a full memory" in recalled
    assert "- Ada once lived in Lisbon near the river" in recalled
    assert "Lisbon" not in await say(conversations, "/recall lisbon", BOB)
    in_group = await say(conversations, "/recall lisbon", ADA, chat_type="group")
    assert "Lisbon near" not in in_group  # her profile is never shown in a group

    forgotten = await say(conversations, "/forget lisbon")  # it finds the archived entry too
    assert forgotten.startswith("Forgotten: Ada once lived in Lisbon near the river\n")
    assert "Nothing of yours" in await say(conversations, "/memory archive")
    assert "Lisbon" not in await say(conversations, "/recall lisbon river")
    assert "Lisbon" not in await say(conversations, "/memory history")


async def test_memory_history_is_private_only(services: Services) -> None:
    add(services, ADA, "Ada keeps bees", REVIEW)
    reply = await say(serving(services), "/memory history", ADA, chat_type="group")
    assert "bees" not in reply and "private chat" in reply

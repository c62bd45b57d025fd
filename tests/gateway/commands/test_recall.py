"""`/recall` through `Conversations` (list sink, fake model) and through `mnemo chat`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.app import Services
from gateway.commands.recall import USAGE
from gateway.messages import InboundMessage
from memory_core import NewMessage, SessionOrigin
from tests.fakes.openai import FakeOpenAI
from tests.gateway.processes import run_mnemo
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink


def message(
    text: str, user: str = "42", chat: str | None = None, group: bool = False
) -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id=chat or user,
        chat_type="group" if group else "private",
        user_id=user,
        text=text,
    )


async def seed(
    services: Services, user: str, words: str, when: datetime, chat: str | None = None
) -> int:
    """An ended past conversation of `user` on `when`."""
    group = chat is not None
    origin = SessionOrigin(
        session_key=f"seed:{user}:{when.timestamp()}",
        source="telegram",
        user_key=f"telegram-{user}",
        chat_id=chat or user,
        chat_type="group" if group else "private",
    )
    at = when.timestamp()
    result = await services.sessions.append_messages(
        origin=origin,
        messages=[
            NewMessage("user", words, at, key="0"),
            NewMessage("assistant", "Noted.", at + 1, key="1"),
        ],
    )
    await services.sessions.end_session(result.session_id, "new")
    return result.session_id


def chat_requests(fake: FakeOpenAI) -> list[dict[str, object]]:
    return [r.body for r in fake.requests if r.path.endswith("/chat/completions")]


async def test_recall_recaps_newest_first_with_dates_via_the_auxiliary_model(
    fake: FakeOpenAI, services: Services
) -> None:
    now = datetime.now(UTC)
    await seed(services, "42", "my dentist is Dr Okafor", now - timedelta(days=40))
    await seed(services, "42", "the dentist moved to Elm Street", now - timedelta(days=2))
    fake.say("RECAP-A")
    fake.say("RECAP-B")
    sink = ListSink()
    await serving(services).handle(message("/recall dentist"), sink)
    reply = sink.replies[0]
    old, new = (now - timedelta(days=40)).date(), (now - timedelta(days=2)).date()
    assert reply.startswith('What I found for "dentist" in all our past conversations')
    assert reply.index(new.isoformat()) < reply.index(old.isoformat())  # newest first
    assert "RECAP-A" in reply and "RECAP-B" in reply
    bodies = chat_requests(fake)
    assert len(bodies) == 2 and not any(b.get("stream") for b in bodies)  # recaps only
    assert await services.sessions.current_session("telegram:private:42") is None  # not stored


async def test_a_time_phrase_narrows_the_window_and_nothing_found_names_it(
    fake: FakeOpenAI, services: Services
) -> None:
    now = datetime.now(UTC)
    await seed(services, "42", "dentist appointment booked", now - timedelta(days=40))
    sink = ListSink()
    await serving(services).handle(message("/recall dentist yesterday"), sink)
    yesterday = (now - timedelta(days=1)).date().isoformat()
    assert sink.replies == [f'Nothing found for "dentist" on {yesterday}.']
    assert chat_requests(fake) == []


async def test_chinese_time_phrase(fake: FakeOpenAI, services: Services) -> None:
    now = datetime.now(UTC)
    await seed(services, "42", "健身计划 每周三次", now - timedelta(days=1))
    fake.say("RECAP-GYM")
    sink = ListSink()
    await serving(services).handle(message("/recall 健身 昨天"), sink)
    yesterday = (now - timedelta(days=1)).date().isoformat()
    assert sink.replies[0].startswith(f'What I found for "健身" on {yesterday}')
    assert "RECAP-GYM" in sink.replies[0]


async def test_recall_never_shows_another_persons_sessions(
    fake: FakeOpenAI, services: Services
) -> None:
    now = datetime.now(UTC)
    await seed(services, "42", "dentist Dr Okafor on Tuesday", now - timedelta(days=3))
    await seed(services, "7", "dentist Dr Zanzibar-Quill secret", now - timedelta(days=1))
    fake.say("RECAP-42")
    sink = ListSink()
    await serving(services).handle(message("/recall dentist"), sink)
    bodies = chat_requests(fake)
    assert len(bodies) == 1
    assert "Okafor" in str(bodies[0]) and "Zanzibar" not in str(bodies[0])
    assert "Zanzibar" not in sink.replies[0]
    await serving(services).handle(message("/recall Okafor", user="7"), sink)
    assert sink.replies[1].startswith('Nothing found for "Okafor"')


async def test_in_a_group_only_that_groups_conversations(
    fake: FakeOpenAI, services: Services
) -> None:
    now = datetime.now(UTC)
    await seed(services, "42", "dentist in private", now - timedelta(days=3))
    await seed(services, "42", "dentist in the group", now - timedelta(days=2), chat="-100")
    fake.say("RECAP-GROUP")
    sink = ListSink()
    await serving(services).handle(message("/recall dentist", chat="-100", group=True), sink)
    bodies = chat_requests(fake)
    assert len(bodies) == 1 and "in the group" in str(bodies[0])
    assert "in private" not in str(bodies[0])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/recall", USAGE),
        ("/recall   ", USAGE),
        ("/recall the and of", "Those are only common words"),
        ("/recall ***", "There is nothing to search for"),
    ],
)
async def test_bad_input_gets_a_clear_reply_and_no_model_call(
    fake: FakeOpenAI, services: Services, text: str, expected: str
) -> None:
    sink = ListSink()
    await serving(services).handle(message(text), sink)
    assert sink.replies[0].startswith(expected)
    assert chat_requests(fake) == []


async def test_fts_syntax_is_searched_as_words_and_said_so(
    fake: FakeOpenAI, services: Services
) -> None:
    await seed(services, "42", "dentist bill", datetime.now(UTC) - timedelta(days=3))
    sink = ListSink()
    await serving(services).handle(message('/recall NEAR("dentist" OR x*)'), sink)
    assert "read as plain words" in sink.replies[0]


@pytest.mark.slow  # a real mnemo process, start to exit
def test_mnemo_chat_recall_end_to_end(tmp_path: Path) -> None:
    """A real `mnemo chat` against the standalone fake: talk, /new, then /recall."""
    lines = "my dentist is Dr Okafor\n/new\n/recall dentist\n/recall\n"
    result = run_mnemo("chat", lines, home=tmp_path / "d", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    today = datetime.now(UTC).date().isoformat()
    assert (
        'What I found for "dentist" in all our past conversations, newest first:' in result.stdout
    )
    assert f"{today} (console, a private chat):" in result.stdout
    assert "Okafor" in result.stdout.split("What I found")[1]  # the echoed recap request
    assert USAGE in result.stdout


async def test_in_a_group_the_reply_says_it_searched_that_group(
    fake: FakeOpenAI, services: Services
) -> None:
    await seed(services, "42", "dentist in private", datetime.now(UTC) - timedelta(days=3))
    sink = ListSink()
    await serving(services).handle(message("/recall dentist", chat="-100", group=True), sink)
    assert sink.replies == ['Nothing found for "dentist" in this group\'s past conversations.']
    assert "all our" not in sink.replies[0]


async def test_a_range_beyond_what_the_store_holds_searches_all_of_it(
    fake: FakeOpenAI, services: Services
) -> None:
    """Not one day of year 1: the range is read, and kept to 1970 to the end of 9999."""
    now = datetime.now(UTC)
    await seed(services, "42", "pizza at Luigi's", now - timedelta(days=400))
    await seed(services, "42", "pizza again", now - timedelta(days=2))
    fake.say("RECAP-OLD")
    fake.say("RECAP-NEW")
    sink = ListSink()
    conversations = serving(services)
    await conversations.handle(message("/recall pizza since 0001-01-01 until 9999-12-31"), sink)
    reply = sink.replies[0]
    assert reply.startswith('What I found for "pizza" since 1970-01-01, newest first:')
    assert "RECAP-OLD" in reply and "RECAP-NEW" in reply
    await conversations.handle(message("/recall pizza on 9999-12-31"), sink)  # no overflow
    assert sink.replies[1] == 'Nothing found for "pizza" since 9999-12-31.'
    start = (now - timedelta(days=3)).date().isoformat()
    end = (now - timedelta(days=1)).date().isoformat()
    await conversations.handle(message(f"/recall pizza from {end} to {start}"), sink)  # backwards
    assert sink.replies[2].startswith(f'What I found for "pizza" from {start} to {end}')


async def test_what_only_this_conversation_says_is_named_as_such(
    fake: FakeOpenAI, services: Services
) -> None:
    fake.say("Noted.")
    sink = ListSink()
    conversations = serving(services)
    await conversations.handle(message("my plumber is called Mario"), sink)
    await conversations.handle(message("/recall plumber"), sink)
    assert sink.replies[-1] == (
        'Only this conversation mentions "plumber" so far; /recall looks in our earlier ones.'
    )
    await conversations.handle(message("/recall electrician"), sink)
    assert sink.replies[-1].startswith('Nothing found for "electrician"')

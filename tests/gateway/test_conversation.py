"""`Conversations.handle` driven directly, with a list sink, against the fake model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.app import open_services
from gateway.config import load_config
from gateway.conversation import Conversations, Services
from gateway.messages import InboundMessage
from memory_core import SearchScope
from tests.fakes.openai import FakeOpenAI, Fault

SKILLS = Path(__file__).resolve().parents[2] / "skills"


class ListSink:
    """Collects each reply: the pieces written, closed by `finish`."""

    def __init__(self) -> None:
        self.replies: list[str] = []
        self._pieces: list[str] = []

    async def write(self, piece: str) -> None:
        self._pieces.append(piece)

    async def finish(self) -> None:
        self.replies.append("".join(self._pieces))
        self._pieces = []


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(chunk_size=4) as server:
        yield server


@pytest.fixture
async def services(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    env = {
        "OPENAI_BASE_URL": fake.url + "/v1",
        "MNEMO_HOME": str(tmp_path / "data"),
        "MNEMO_SKILLS_DIR": str(SKILLS),
    }
    async with open_services(load_config(None, environ=env)) as opened:
        yield opened


def message(
    text: str, user: str = "42", chat: str = "42", chat_type: str = "private"
) -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id=chat,
        chat_type=chat_type,
        user_id=user,
        text=text,  # type: ignore[arg-type]
    )


async def stored(services: Services, user: str = "42") -> list[tuple[str, str]]:
    scope = SearchScope(user_key=f"telegram-{user}")
    sessions = await services.sessions.list_sessions(scope)
    return [
        (m.role, m.content)
        for s in reversed(sessions)
        for m in await services.sessions.get_messages(s.id, scope, lineage=False)
    ]


async def test_a_turn_is_answered_and_stored(fake: FakeOpenAI, services: Services) -> None:
    fake.say("Hi Grace.")
    sink = ListSink()
    await Conversations(services).handle(message("hello"), sink)
    assert sink.replies == ["Hi Grace."]
    assert await stored(services) == [("user", "hello"), ("assistant", "Hi Grace.")]


async def test_commands_answer_without_the_model_and_are_not_stored(
    fake: FakeOpenAI, services: Services
) -> None:
    sink = ListSink()
    conversations = Conversations(services)
    await conversations.handle(message("/help"), sink)
    await conversations.handle(message("/memory"), sink)
    assert fake.requests == []
    assert "/new — " in sink.replies[0] and "/memory — " in sink.replies[0]
    assert sink.replies[1] == "I don't remember anything about you yet."
    assert await stored(services) == []


async def test_new_ends_the_session_and_the_next_message_starts_another(
    fake: FakeOpenAI, services: Services
) -> None:
    fake.say("one")
    fake.say("two")
    sink = ListSink()
    conversations = Conversations(services)
    await conversations.handle(message("first"), sink)
    await conversations.handle(message("/new@mnemo_bot"), sink)
    await conversations.handle(message("second"), sink)
    assert sink.replies == ["one", "Started a fresh session.", "two"]
    sessions = await services.sessions.list_sessions(SearchScope(user_key="telegram-42"))
    assert len(sessions) == 2
    ended = [s for s in sessions if s.ended_at is not None]
    assert [s.end_reason for s in ended] == ["new"]


async def test_a_model_error_is_one_line_and_the_message_is_kept(
    fake: FakeOpenAI, services: Services
) -> None:
    fake.fail_next(Fault.http(500))
    sink = ListSink()
    await Conversations(services).handle(message("are you there?"), sink)
    assert len(sink.replies) == 1 and "not answering" in sink.replies[0]
    assert await stored(services) == [("user", "are you there?")]


async def test_two_people_never_share_a_session(fake: FakeOpenAI, services: Services) -> None:
    fake.say("for ada")
    fake.say("for bob")
    sink = ListSink()
    conversations = Conversations(services)
    await conversations.handle(message("I am Ada", user="1", chat="1"), sink)
    await conversations.handle(message("I am Bob", user="2", chat="2"), sink)
    assert await stored(services, "1") == [("user", "I am Ada"), ("assistant", "for ada")]
    assert await stored(services, "2") == [("user", "I am Bob"), ("assistant", "for bob")]
    second_request = fake.requests[1].body["messages"]
    assert all("Ada" not in str(m.get("content")) for m in second_request)

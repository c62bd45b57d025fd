"""`Conversations.handle` driven directly, with a list sink, against the fake model."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.agent.turn import CREDENTIALS_NOTE, CUT_NOTE, EMPTY_NOTE, FILTERED_NOTE
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


# -- model faults the person can understand ----------------------------------

STALL = 0.5  # llm.stall_timeout in the tests below; llm.timeout stays at 5 s


@pytest.fixture
async def quick(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    """Services whose model client gives up on a silent stream after `STALL` seconds."""
    config_file = tmp_path / "mnemo.yaml"
    config_file.write_text(f"llm:\n  timeout: 5.0\n  stall_timeout: {STALL}\n", encoding="utf-8")
    env = {
        "OPENAI_BASE_URL": fake.url + "/v1",
        "OPENAI_API_KEY": "sk-wrong",
        "MNEMO_HOME": str(tmp_path / "data"),
        "MNEMO_SKILLS_DIR": str(SKILLS),
    }
    async with open_services(load_config(config_file, environ=env)) as opened:
        yield opened


async def test_a_stall_mid_reply_is_detected_in_the_stall_timeout_and_the_text_kept(
    fake: FakeOpenAI, quick: Services
) -> None:
    fake.say("Half of an answer that then goes silent", fault=Fault.stall(after=3))
    sink = ListSink()
    started = time.monotonic()
    await Conversations(quick).handle(message("tell me"), sink)
    elapsed = time.monotonic() - started
    shown = "Half of \n" + CUT_NOTE  # the role delta, "Half", " of ", then silence
    assert sink.replies == [shown]
    assert await stored(quick) == [("user", "tell me"), ("assistant", shown)]
    assert len(fake.requests) == 1  # text was shown: no retry, nothing duplicated
    assert elapsed < 4 * STALL  # not the 5 s timeout, let alone three of them


async def test_a_429_with_retry_after_is_retried_and_answered_once(
    fake: FakeOpenAI, quick: Services
) -> None:
    fake.fail_next(Fault.http(429, retry_after=0.2))
    fake.say("Here you go.")
    sink = ListSink()
    await Conversations(quick).handle(message("hello"), sink)
    assert sink.replies == ["Here you go."]
    assert len(fake.requests) == 2
    assert await stored(quick) == [("user", "hello"), ("assistant", "Here you go.")]


async def test_text_before_a_cut_is_stored_with_the_turn(fake: FakeOpenAI, quick: Services) -> None:
    fake.say("The first step is to", fault=Fault.cut(after=3, hard=True))
    sink = ListSink()
    await Conversations(quick).handle(message("how?"), sink)
    assert sink.replies == ["The firs\n" + CUT_NOTE]
    assert await stored(quick) == [("user", "how?"), ("assistant", sink.replies[0])]


async def test_an_empty_reply_says_so_and_is_stored_as_shown(
    fake: FakeOpenAI, quick: Services
) -> None:
    fake.say("")
    sink = ListSink()
    await Conversations(quick).handle(message("hello?"), sink)
    assert sink.replies == [EMPTY_NOTE]
    assert await stored(quick) == [("user", "hello?"), ("assistant", EMPTY_NOTE)]


async def test_a_filtered_reply_says_so(fake: FakeOpenAI, quick: Services) -> None:
    fake.say("", finish_reason="content_filter")
    sink = ListSink()
    await Conversations(quick).handle(message("something edgy"), sink)
    assert sink.replies == [FILTERED_NOTE]


async def test_upstream_error_text_goes_to_the_log_not_to_the_person(
    fake: FakeOpenAI, quick: Services, caplog: pytest.LogCaptureFixture
) -> None:
    fake.api_key = "sk-right"  # the bot sends sk-wrong: a 401 "Incorrect API key provided"
    sink = ListSink()
    with caplog.at_level(logging.WARNING, logger="gateway"):
        await Conversations(quick).handle(message("hi"), sink)
    assert sink.replies == [CREDENTIALS_NOTE]
    assert "credentials" in CREDENTIALS_NOTE and "Incorrect" not in CREDENTIALS_NOTE
    assert "Incorrect API key provided" in caplog.text and "401" in caplog.text
    assert len(fake.requests) == 1


async def test_a_5xx_shows_a_generic_line_without_the_status(
    fake: FakeOpenAI, quick: Services, caplog: pytest.LogCaptureFixture
) -> None:
    for _ in range(3):
        fake.fail_next(Fault.http(503, message="upstream overloaded (shard 7)"))
    sink = ListSink()
    with caplog.at_level(logging.WARNING, logger="gateway"):
        await Conversations(quick).handle(message("hi"), sink)
    assert sink.replies == ["(the model is not answering right now; please try again in a moment)"]
    assert "shard 7" in caplog.text and "503" in caplog.text


async def test_a_conversation_too_long_for_the_model_starts_a_fresh_session(
    fake: FakeOpenAI, quick: Services
) -> None:
    too_long = Fault.http(
        400,
        message="This model's maximum context length is 128000 tokens.",
        code="context_length_exceeded",
    )
    fake.say("first answer")
    sink = ListSink()
    conversations = Conversations(quick)
    await conversations.handle(message("first"), sink)
    fake.fail_next(too_long)
    fake.say("fresh answer")
    await conversations.handle(message("second"), sink)
    await conversations.handle(message("third"), sink)
    assert "grown too long" in sink.replies[1] and "fresh one" in sink.replies[1]
    assert sink.replies[2] == "fresh answer"
    sessions = await quick.sessions.list_sessions(SearchScope(user_key="telegram-42"))
    assert [s.end_reason for s in sessions if s.ended_at is not None] == ["too_long"]
    # The next turn goes out without the history that was too long.
    assert [m["role"] for m in fake.requests[-1].body["messages"]] == ["system", "user"]


async def test_one_message_too_long_for_the_model_asks_for_a_shorter_one(
    fake: FakeOpenAI, quick: Services
) -> None:
    fake.fail_next(Fault.http(413, message="Request Entity Too Large"))
    fake.say("short answer")
    sink = ListSink()
    conversations = Conversations(quick)
    await conversations.handle(message("x" * 5000), sink)
    await conversations.handle(message("/new"), sink)
    await conversations.handle(message("short"), sink)
    assert "message is too long" in sink.replies[0] and "shorter" in sink.replies[0]
    assert sink.replies[2] == "short answer"

"""`Conversations.handle` driven directly, with a list sink, against the fake model."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.agent.turn import CREDENTIALS_NOTE, CUT_NOTE, EMPTY_NOTE, FILTERED_NOTE
from gateway.app import Services, open_services
from gateway.config import load_config
from gateway.messages import InboundMessage
from memory_core import (
    MemoryManager,
    MemoryProvider,
    ReviewCounters,
    SearchScope,
    SessionContext,
    SessionDB,
)
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink
from tests.timing import scaled

SKILLS = Path(__file__).resolve().parents[2] / "skills"


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
    await serving(services).handle(message("hello"), sink)
    assert sink.replies == ["Hi Grace."]
    assert await stored(services) == [("user", "hello"), ("assistant", "Hi Grace.")]


async def test_commands_answer_without_the_model_and_are_not_stored(
    fake: FakeOpenAI, services: Services
) -> None:
    sink = ListSink()
    conversations = serving(services)
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
    conversations = serving(services)
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
    await serving(services).handle(message("are you there?"), sink)
    assert len(sink.replies) == 1 and "not answering" in sink.replies[0]
    assert await stored(services) == [("user", "are you there?")]


async def test_two_people_never_share_a_session(fake: FakeOpenAI, services: Services) -> None:
    fake.say("for ada")
    fake.say("for bob")
    sink = ListSink()
    conversations = serving(services)
    await conversations.handle(message("I am Ada", user="1", chat="1"), sink)
    await conversations.handle(message("I am Bob", user="2", chat="2"), sink)
    assert await stored(services, "1") == [("user", "I am Ada"), ("assistant", "for ada")]
    assert await stored(services, "2") == [("user", "I am Bob"), ("assistant", "for bob")]
    second_request = fake.requests[1].body["messages"]
    assert all("Ada" not in str(m.get("content")) for m in second_request)


# -- model faults the person can understand ----------------------------------

STALL = 0.5  # llm.stall_timeout in the tests below; llm.timeout stays at scaled(5) s


@pytest.fixture
async def quick(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    """Services whose model client gives up on a silent stream after `STALL` seconds."""
    config_file = tmp_path / "mnemo.yaml"
    config_file.write_text(
        f"llm:\n  timeout: {scaled(5.0)}\n  stall_timeout: {STALL}\n", encoding="utf-8"
    )
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
    await serving(quick).handle(message("tell me"), sink)
    elapsed = time.monotonic() - started
    shown = "Half of \n" + CUT_NOTE  # the role delta, "Half", " of ", then silence
    assert sink.replies == [shown]
    assert await stored(quick) == [("user", "tell me"), ("assistant", shown)]
    assert len(fake.requests) == 1  # text was shown: no retry, nothing duplicated
    assert elapsed < scaled(4 * STALL)  # not the llm.timeout (2.5 times that), let alone three


async def test_a_429_with_retry_after_is_retried_and_answered_once(
    fake: FakeOpenAI, quick: Services
) -> None:
    fake.fail_next(Fault.http(429, retry_after=0.2))
    fake.say("Here you go.")
    sink = ListSink()
    await serving(quick).handle(message("hello"), sink)
    assert sink.replies == ["Here you go."]
    assert len(fake.requests) == 2
    assert await stored(quick) == [("user", "hello"), ("assistant", "Here you go.")]


async def test_text_before_a_cut_is_stored_with_the_turn(fake: FakeOpenAI, quick: Services) -> None:
    fake.say("The first step is to", fault=Fault.cut(after=3, hard=True))
    sink = ListSink()
    await serving(quick).handle(message("how?"), sink)
    assert sink.replies == ["The firs\n" + CUT_NOTE]
    assert await stored(quick) == [("user", "how?"), ("assistant", sink.replies[0])]


async def test_an_empty_reply_says_so_and_is_stored_as_shown(
    fake: FakeOpenAI, quick: Services
) -> None:
    fake.say("")
    sink = ListSink()
    await serving(quick).handle(message("hello?"), sink)
    assert sink.replies == [EMPTY_NOTE]
    assert await stored(quick) == [("user", "hello?"), ("assistant", EMPTY_NOTE)]


async def test_a_filtered_reply_says_so(fake: FakeOpenAI, quick: Services) -> None:
    fake.say("", finish_reason="content_filter")
    sink = ListSink()
    await serving(quick).handle(message("something edgy"), sink)
    assert sink.replies == [FILTERED_NOTE]


async def test_upstream_error_text_goes_to_the_log_not_to_the_person(
    fake: FakeOpenAI, quick: Services, caplog: pytest.LogCaptureFixture
) -> None:
    fake.api_key = "sk-right"  # the bot sends sk-wrong: a 401 "Incorrect API key provided"
    sink = ListSink()
    with caplog.at_level(logging.WARNING, logger="gateway"):
        await serving(quick).handle(message("hi"), sink)
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
        await serving(quick).handle(message("hi"), sink)
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
    conversations = serving(quick)
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
    conversations = serving(quick)
    await conversations.handle(message("x" * 5000), sink)
    await conversations.handle(message("/new"), sink)
    await conversations.handle(message("short"), sink)
    assert "message is too long" in sink.replies[0] and "shorter" in sink.replies[0]
    assert sink.replies[2] == "short answer"


# -- prompts and history that survive restarts and eviction (issue 11 items 5-6) -----


def assert_prefix_kept(requests: list[list[dict[str, object]]]) -> None:
    """Each request starts with the previous one but its last message, byte for byte."""
    as_bytes = [[json.dumps(m, ensure_ascii=False) for m in sent] for sent in requests]
    for n, (before, after) in enumerate(itertools.pairwise(as_bytes), start=1):
        assert after[: len(before) - 1] == before[:-1], f"request {n + 1} changed the prefix"
        assert after[0] == as_bytes[0][0], f"request {n + 1} has another system message"


def profile_path(services: Services, user: str = "42") -> Path:
    return services.config.home / "memories" / "users" / f"telegram-{user}" / "USER.md"


def script_turn(fake: FakeOpenAI, i: int) -> None:
    """Turn `i`: every third turn saves a fact (a tool call with no text) first."""
    if i % 3 == 1:
        fact = {"target": "user", "action": "add", "content": f"Fact number {i}"}
        fake.call_tools(ToolCall("memory", fact, id=f"call_{i}"))
    fake.say(f"answer {i}")


async def test_thirty_turns_with_memory_writes_keep_the_request_prefix(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    sink = ListSink()
    for i in range(30):
        script_turn(fake, i)
        await conversations.handle(message(f"message {i}, fact number {i}"), sink)
    assert sink.replies == [f"answer {i}" for i in range(30)]
    assert "Fact number 28" in profile_path(services).read_text(encoding="utf-8")
    sent = [r.body["messages"] for r in fake.requests]
    assert len(sent) == 40  # 30 replies and 10 tool steps
    assert_prefix_kept(sent)
    # The replayed tool steps are exactly what was sent: null text, the tool's name.
    replayed = sent[-1]
    call = next(m for m in replayed if m.get("tool_calls"))
    assert call["content"] is None
    result = next(m for m in replayed if m["role"] == "tool")
    assert result["name"] == "memory" and result["tool_call_id"] == "call_1"
    assert "Fact number" not in replayed[0]["content"]  # the prompt stays as it started


async def test_a_new_conversations_resumes_the_open_session_with_its_stored_prompt(
    fake: FakeOpenAI, services: Services
) -> None:
    """A restart: `close()` leaves the session open, and USER.md changes before the next run."""
    first = serving(services)
    for i in range(3):
        script_turn(fake, i)
        await first.handle(message(f"message {i}, fact number {i}"), ListSink())
    await first.close()
    profile_path(services).write_text("Name: Grace Hopper\n", encoding="utf-8")
    second = serving(services)
    script_turn(fake, 3)
    await second.handle(message("message 3"), ListSink())
    sent = [r.body["messages"] for r in fake.requests]
    assert_prefix_kept(sent)
    assert "Grace" not in sent[-1][0]["content"]
    sessions = await services.sessions.list_sessions(SearchScope(user_key="telegram-42"))
    assert len(sessions) == 1 and sessions[0].ended_at is None


@pytest.fixture
async def small_cache(tmp_path: Path) -> AsyncIterator[tuple[FakeOpenAI, Services]]:
    """Services keeping at most 50 sessions in memory, against a fake that echoes."""
    config_file = tmp_path / "mnemo.yaml"
    config_file.write_text("sessions:\n  max_open: 50\n", encoding="utf-8")
    async with FakeOpenAI(chunk_size=64, echo_when_idle=True) as echo:
        env = {
            "OPENAI_BASE_URL": echo.url + "/v1",
            "MNEMO_HOME": str(tmp_path / "data"),
            "MNEMO_SKILLS_DIR": str(SKILLS),
        }
        async with open_services(load_config(config_file, environ=env)) as opened:
            yield echo, opened


@pytest.mark.slow
async def test_six_hundred_sessions_stay_within_max_open(
    small_cache: tuple[FakeOpenAI, Services],
) -> None:
    echo, services = small_cache
    assert services.config.sessions.max_open == 50
    conversations = serving(services)
    most = 0
    for user in range(600):  # twelve times the bound
        await conversations.handle(
            message(f"hi from {user}", user=str(user), chat=str(user)), ListSink()
        )
        most = max(most, conversations.sessions.open_count)
        assert conversations.sessions.lock_count == 0
    assert most == 50 and conversations.sessions.open_count == 50
    first_prompt = echo.requests[0].body["messages"][0]["content"]
    # User 0 was evicted long ago; their profile changed meanwhile.
    profile_path(services, "0").parent.mkdir(parents=True, exist_ok=True)
    profile_path(services, "0").write_text("Name: Changed\n", encoding="utf-8")
    await conversations.handle(message("back again", user="0", chat="0"), ListSink())
    resumed = echo.requests[-1].body["messages"]
    assert resumed[0]["content"] == first_prompt
    assert [m["content"] for m in resumed[1:]] == ["hi from 0", "echo: hi from 0", "back again"]
    assert conversations.sessions.open_count == 50
    sessions = await services.sessions.list_sessions(SearchScope(user_key="telegram-0"))
    assert len(sessions) == 1 and sessions[0].ended_at is None  # evicted, never ended


async def test_concurrent_messages_of_many_keys_leave_no_locks_behind(
    small_cache: tuple[FakeOpenAI, Services],
) -> None:
    _, services = small_cache
    conversations = serving(services)
    await asyncio.gather(
        *(
            conversations.handle(message(f"m{i}", user=str(i % 120), chat=str(i % 120)), ListSink())
            for i in range(240)
        )
    )
    assert conversations.sessions.lock_count == 0
    assert conversations.sessions.open_count == 50
    for user in (0, 119):
        stored_here = await stored(services, str(user))
        assert [role for role, _ in stored_here] == ["user", "assistant"] * 2


async def test_review_counters_survive_eviction_and_reopening_the_store(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config_file = tmp_path / "mnemo.yaml"
    config_file.write_text("sessions:\n  max_open: 1\n", encoding="utf-8")
    env = {
        "OPENAI_BASE_URL": fake.url + "/v1",
        "MNEMO_HOME": str(tmp_path / "data"),
        "MNEMO_SKILLS_DIR": str(SKILLS),
    }
    config = load_config(config_file, environ=env)
    async with open_services(config) as services:
        conversations = serving(services)
        fake.say("plain")
        await conversations.handle(message("one", user="1", chat="1"), ListSink())
        fake.call_tools(ToolCall("skills_list", {}))
        fake.say("listed")
        await conversations.handle(message("two", user="1", chat="1"), ListSink())
        fake.say("other person")  # evicts user 1's session (max_open 1)
        await conversations.handle(message("hi", user="2", chat="2"), ListSink())
        fake.call_tools(ToolCall("skills_list", {}))
        fake.call_tools(ToolCall("skills_list", {}))
        fake.say("listed twice")
        await conversations.handle(message("three", user="1", chat="1"), ListSink())
        fact = {"target": "user", "action": "add", "content": "Likes tea"}
        fake.call_tools(ToolCall("memory", fact))
        fake.say("saved")
        await conversations.handle(message("I like tea", user="2", chat="2"), ListSink())
        assert conversations.sessions.open_count == 1
        await conversations.close()
        ones = await services.sessions.list_sessions(SearchScope(user_key="telegram-1"))
        twos = await services.sessions.list_sessions(SearchScope(user_key="telegram-2"))
    with SessionDB(config.home / "state.db") as db:
        assert db.get_counters(ones[0].id) == ReviewCounters(
            turns_since_memory=3, steps_since_skill=3
        )
        assert db.get_counters(twos[0].id) == ReviewCounters(
            turns_since_memory=0, steps_since_skill=1
        )


class RecordingProvider(MemoryProvider):
    """Notes which sessions it served and which it was shut down for."""

    name = "recording"

    def __init__(self, log: list[tuple[str, int]]) -> None:
        self._log = log
        self._session_id = 0

    async def initialize(self, session: SessionContext) -> None:
        self._session_id = session.session_id
        self._log.append(("initialize", session.session_id))

    async def shutdown(self) -> None:
        self._log.append(("shutdown", self._session_id))


async def test_an_evicted_session_shuts_its_providers_down_and_resumes_later(
    small_cache: tuple[FakeOpenAI, Services],
) -> None:
    _, services = small_cache
    events: list[tuple[str, int]] = []
    recording = dataclasses.replace(
        services, new_manager=lambda: MemoryManager([RecordingProvider(events)])
    )
    conversations = serving(recording)
    for user in range(52):
        await conversations.handle(message("hi", user=str(user), chat=str(user)), ListSink())
    started = [s for kind, s in events if kind == "initialize"]

    def shut() -> list[int]:
        return [s for kind, s in events if kind == "shutdown"]

    await wait_until(lambda: len(shut()) == 2)  # in the background: no turn waits for it
    assert shut() == started[:2]  # users 0 and 1, the least recently used
    await conversations.handle(message("again", user="0", chat="0"), ListSink())
    # User 0's session comes back under its own id; user 2's, now the oldest, goes.
    assert [s for kind, s in events if kind == "initialize"][-1] == started[0]
    await wait_until(lambda: len(shut()) == 3)
    assert shut()[-1] == started[2]
    await conversations.close()
    assert conversations.sessions.open_count == 0
    assert sum(kind == "shutdown" for kind, _ in events) == 53  # every manager, once


async def test_with_recall_only_the_previous_requests_last_message_differs(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    fake.say("Use the blue-green switch.")
    await conversations.handle(message("how do we roll back the billing deploy?"), ListSink())
    await conversations.handle(message("/new"), ListSink())
    for i in range(4):
        fake.say(f"answer {i}")
        await conversations.handle(message(f"about the billing deploy rollback, {i}?"), ListSink())
    sent = [r.body["messages"] for r in fake.requests[1:]]  # the second session's requests
    assert all("<memory-context>" in s[-1]["content"] for s in sent)  # recall on every turn
    for before, after in itertools.pairwise(sent):
        cut = len(before) - 1
        assert after[:cut] == before[:cut]
        plain, with_recall = after[cut]["content"], before[cut]["content"]
        assert with_recall.startswith(plain + "\n\n<memory-context>")

"""/start, /help, /skills and /status through `Conversations` and the console."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.app import Services
from gateway.config import load_config
from gateway.messages import InboundMessage
from gateway.service import run_console
from memory_core import Operation
from tests.fakes.base import serving_in_thread
from tests.fakes.openai import FakeOpenAI
from tests.gateway.commands.registries import builtin_registry
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink

SKILLS = Path(__file__).resolve().parents[3] / "skills"
SKILL = "---\nname: {name}\ndescription: {description}\n---\nSteps.\n"


def message(text: str, user: str = "42") -> InboundMessage:
    return InboundMessage(
        platform="telegram", chat_id=user, chat_type="private", user_id=user, text=text
    )


def chat_requests(fake: FakeOpenAI) -> int:
    return sum(1 for r in fake.requests if r.path.endswith("/chat/completions"))


@pytest.mark.parametrize("command", ["/start", "/help"])
async def test_start_and_help_say_what_is_kept_and_how_to_erase_it(
    fake: FakeOpenAI, services: Services, command: str
) -> None:
    sink = ListSink()
    await serving(services).handle(message(command), sink)
    reply = sink.replies[0]
    assert "remembers you" in reply
    for how in ("/memory", "/forget <text or number>", "/forget all", "/export"):
        assert how in reply
    english = services.locales.default()
    for command_line in builtin_registry(services).help_lines(False, english):
        assert command_line in reply
    assert "/promote — " not in reply  # admin-only, not for this person
    assert chat_requests(fake) == 0


async def test_skills_lists_what_this_person_sees(fake: FakeOpenAI, services: Services) -> None:
    services.skills.create(
        "tea-timer", SKILL.format(name="tea-timer", description="times tea"), user_key="telegram-42"
    )
    sink = ListSink()
    conversations = serving(services)
    await conversations.handle(message("/skills"), sink)
    await conversations.handle(message("/skills", user="7"), sink)
    assert "- tea-timer (yours): times tea" in sink.replies[0]
    assert "tea-timer" not in sink.replies[1]  # another person's skill is not listed
    assert chat_requests(fake) == 0


async def test_status_shows_session_model_and_memory_usage(
    fake: FakeOpenAI, services: Services
) -> None:
    sink = ListSink()
    conversations = serving(services)
    await conversations.handle(message("/status"), sink)
    assert sink.replies[0].startswith("Session: none open")
    fake.say("Hello.")
    await conversations.handle(message("hi"), sink)
    services.memory.apply("user", "telegram-42", [Operation("add", "Name is Grace")])
    await conversations.handle(message("/status"), sink)
    status = sink.replies[2]
    today = datetime.now(UTC).date().isoformat()
    assert f"Session: started {today}" in status and "2 messages so far" in status
    assert f"Model: {services.model.model}" in status
    limit = services.config.memory.user_char_limit
    assert f"{len('Name is Grace')} of {limit:,} characters (1 entry)" in status
    assert chat_requests(fake) == 1  # only the "hi" turn


def test_console_help_and_status(tmp_path: Path) -> None:
    with serving_in_thread(FakeOpenAI(chunk_size=4)) as fake:
        env = {"OPENAI_BASE_URL": fake.url + "/v1", "MNEMO_HOME": str(tmp_path / "d")}
        config = load_config(None, environ={**env, "MNEMO_SKILLS_DIR": str(SKILLS)})
        out = io.StringIO()
        lines = io.StringIO("/help\n/status\n/skills\n")
        run_console(config, stdin=lines, stdout=out, user_id="ada")
        text = out.getvalue()
        assert "/recall — " in text and "/status — " in text and "/skills — " in text
        assert "Session: none open" in text and f"Model: {config.llm.model}" in text
        assert fake.requests == []


def group_message(text: str, user: str = "42") -> InboundMessage:
    return InboundMessage(
        platform="telegram", chat_id="-100", chat_type="group", user_id=user, text=text
    )


async def test_in_a_group_skills_and_status_show_nothing_private(
    fake: FakeOpenAI, services: Services
) -> None:
    services.skills.create(
        "divorce-paperwork",
        SKILL.format(name="divorce-paperwork", description="my lawyer's checklist"),
        user_key="telegram-42",
    )
    services.memory.apply("user", "telegram-42", [Operation("add", content="Ada lives in Leeds")])
    conversations = serving(services)
    group, private = ListSink(), ListSink()
    for text in ("/skills", "/status"):
        await conversations.handle(group_message(text), group)
        await conversations.handle(message(text), private)

    group_skills, group_status = group.replies
    assert "divorce" not in group_skills and "lawyer" not in group_skills
    assert "your own skills" in group_skills and "private chat" in group_skills
    assert "Model: " in group_status
    assert "characters" not in group_status and "entr" not in group_status
    assert "how much I remember about you" in group_status
    # in a private chat the person still sees all of it
    assert "- divorce-paperwork (yours): my lawyer's checklist" in private.replies[0]
    assert "(1 entry)" in private.replies[1]
    assert chat_requests(fake) == 0

"""Unknown `/words`: a pointer to /help in a private chat, silence in a group unless addressed."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from gateway.app import Services
from gateway.config import load_config
from gateway.messages import InboundMessage
from gateway.service import run_console
from memory_core import SearchScope
from tests.fakes.base import serving_in_thread
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink

SKILLS = Path(__file__).resolve().parents[3] / "skills"
UNKNOWN = "Unknown command /frobnicate; see /help for the list."


def message(text: str, group: bool = False, bot: str | None = None) -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id="-100" if group else "42",
        chat_type="group" if group else "private",
        user_id="42",
        text=text,
        bot_username=bot,
    )


async def nothing_stored(services: Services) -> bool:
    return await services.sessions.list_sessions(SearchScope(user_key="telegram-42")) == []


@pytest.mark.parametrize("text", ["/frobnicate", "/frobnicate some args", "/Frobnicate@mnemo_bot"])
async def test_unknown_command_in_a_private_chat_points_to_help(
    fake: FakeOpenAI, services: Services, text: str
) -> None:
    sink = ListSink()
    await serving(services).handle(message(text, bot="mnemo_bot"), sink)
    assert sink.replies == [UNKNOWN]
    assert fake.requests == [] and await nothing_stored(services)


@pytest.mark.parametrize(
    ("text", "bot"),
    [
        ("/frobnicate", "mnemo_bot"),  # not addressed
        ("/frobnicate@mnemo_bot", None),  # the adapter does not know its name
        ("/frobnicate@other_bot", "mnemo_bot"),  # addressed to another bot
        ("/help@other_bot", "mnemo_bot"),  # even a command of ours
    ],
)
async def test_in_a_group_it_is_ignored_unless_addressed_to_this_bot(
    fake: FakeOpenAI, services: Services, text: str, bot: str | None
) -> None:
    sink = ListSink()
    await serving(services).handle(message(text, group=True, bot=bot), sink)
    assert sink.replies == [""]  # no reply
    assert fake.requests == [] and await nothing_stored(services)  # no model turn


async def test_in_a_group_an_unknown_command_addressed_to_this_bot_is_answered(
    fake: FakeOpenAI, services: Services
) -> None:
    sink = ListSink()
    conversations = serving(services)
    await conversations.handle(message("/frobnicate@Mnemo_Bot", group=True, bot="mnemo_bot"), sink)
    await conversations.handle(message("/help", group=True, bot="mnemo_bot"), sink)
    assert sink.replies[0] == UNKNOWN
    assert "/recall — " in sink.replies[1]
    assert fake.requests == []


def test_console_unknown_command(tmp_path: Path) -> None:
    with serving_in_thread(FakeOpenAI(chunk_size=4)) as fake:
        env = {"OPENAI_BASE_URL": fake.url + "/v1", "MNEMO_HOME": str(tmp_path / "d")}
        config = load_config(None, environ={**env, "MNEMO_SKILLS_DIR": str(SKILLS)})
        out = io.StringIO()
        run_console(config, stdin=io.StringIO("/frobnicate\n"), stdout=out, user_id="ada")
        assert UNKNOWN in out.getvalue()
        assert fake.requests == []


async def test_help_in_chinese_or_spanish_is_help(fake: FakeOpenAI, services: Services) -> None:
    sink = ListSink()
    await serving(services).handle(message("/帮助"), sink)
    await serving(services).handle(message("/ayuda"), sink)
    assert len(sink.replies) == 2
    assert all("/recall" in reply for reply in sink.replies)  # the command list
    assert fake.requests == [] and await nothing_stored(services)

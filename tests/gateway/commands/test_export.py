"""/export through `Conversations` and the console: one private file of the person's own data."""

from __future__ import annotations

import io
import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.app import Services, open_services
from gateway.config import load_config
from gateway.conversation import Conversations
from gateway.messages import InboundMessage
from gateway.service import run_console
from memory_core import FileMemoryStore, Operation
from tests.fakes.base import serving_in_thread
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink

SKILLS = Path(__file__).resolve().parents[3] / "skills"
ADA, BOB = "42", "77"


async def say(conversations: Conversations, text: str, user: str = ADA) -> str:
    sink = ListSink()
    message = InboundMessage(
        platform="telegram", chat_id=user, chat_type="private", user_id=user, text=text
    )
    await conversations.handle(message, sink)
    return sink.replies[-1]


def exported_path(reply: str) -> Path:
    return Path(reply.rsplit("one file: ", 1)[1].strip())


async def test_export_writes_the_persons_entries_and_sessions_to_one_private_file(
    services: Services, fake: FakeOpenAI
) -> None:
    conversations = serving(services)
    services.memory.apply("user", f"telegram-{ADA}", [Operation("add", content="Ada likes tea")])
    services.memory.apply("user", f"telegram-{BOB}", [Operation("add", content="Bob keeps bees")])
    fake.say("tea noted")
    await say(conversations, "I drink oolong")
    fake.say("bees noted")
    await say(conversations, "my hives are buzzing", BOB)
    requests = len(fake.requests)

    reply = await say(conversations, "/export")

    assert "(1 memory entry, 2 messages)" in reply
    path = exported_path(reply)
    assert path.parent == services.config.home / "exports" / f"telegram-{ADA}"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert records[0] == {"user": f"telegram-{ADA}", "memory_entry": "Ada likes tea"}
    assert [(r["role"], r["content"]) for r in records[1:]] == [
        ("user", "I drink oolong"),
        ("assistant", "tea noted"),
    ]
    assert "bees" not in path.read_text(encoding="utf-8")
    assert len(fake.requests) == requests  # the command never reached the model

    # the export is the person's data too: /forget all takes it along
    await say(conversations, "/forget all")
    await say(conversations, "/forget all confirm")
    assert not path.exists()
    assert not (services.config.home / "exports" / f"telegram-{ADA}").exists()


@pytest.fixture
def threaded_fake() -> Iterator[FakeOpenAI]:
    with serving_in_thread(FakeOpenAI(chunk_size=4)) as server:
        yield server


def test_console_export_names_the_file(
    threaded_fake: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "data"
    FileMemoryStore(home).apply("user", "console-ada", [Operation("add", content="Ada sails")])
    env = {"OPENAI_BASE_URL": threaded_fake.url + "/v1", "MNEMO_HOME": str(home)}
    config = load_config(None, environ={**env, "MNEMO_SKILLS_DIR": str(SKILLS)})
    out = io.StringIO()
    run_console(config, stdin=io.StringIO("/export\n"), stdout=out, user_id="ada")
    line = next(x for x in out.getvalue().splitlines() if "one file: " in x)
    path = exported_path(line)
    assert path.is_relative_to(home / "exports" / "console-ada")
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "user": "console-ada",
        "memory_entry": "Ada sails",
    }


async def test_export_and_forget_all_are_refused_in_a_group(tmp_path: Path) -> None:
    """In a group the file (or the erasure prompt) would be shown to everyone."""
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "MNEMO_HOME": str(tmp_path / "data")}
    async with open_services(load_config(None, environ=env)) as services:
        conversations = serving(services)
        replies: list[str] = []
        for text in ("/export", "/forget all"):
            sink = _Sink()
            group = InboundMessage(
                platform="telegram", chat_id="-100", chat_type="group", user_id="42", text=text
            )
            await conversations.handle(group, sink)
            replies.append(sink.text)
        assert all("only in a private chat" in reply for reply in replies)
        assert not (tmp_path / "data" / "exports").exists()


class _Sink:
    def __init__(self) -> None:
        self.text = ""

    async def write(self, piece: str) -> None:
        self.text += piece

    async def finish(self) -> None:
        pass

"""/export through `Conversations` and the console: one private file of the person's own data."""

from __future__ import annotations

import io
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.app import Services, open_services
from gateway.commands import CommandRegistry, parse_command
from gateway.commands.choices import PendingChoices
from gateway.commands.erase import export_command, person_data
from gateway.commands.router import CommandRouter
from gateway.config import TelegramConfig, load_config
from gateway.conversation import Conversations
from gateway.messages import InboundMessage, MessageIdentity
from gateway.service import run_console
from memory_core import FileMemoryStore, Operation
from tests.fakes.base import serving_in_thread, wait_until
from tests.fakes.openai import FakeOpenAI
from tests.fakes.telegram import FakeTelegram
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink

SKILLS = Path(__file__).resolve().parents[3] / "skills"
ADA, BOB = "42", "77"
TOKEN = "123:ABC"


async def say(conversations: Conversations, text: str, user: str = ADA) -> str:
    sink = ListSink()
    message = InboundMessage(
        platform="telegram", chat_id=user, chat_type="private", user_id=user, text=text
    )
    await conversations.handle(message, sink)
    return sink.replies[-1]


def exported_path(reply: str) -> Path:
    """The path the console's reply names (it runs on the operator's machine)."""
    return Path(reply.rsplit("deleted in 10 minutes): ", 1)[1].strip())


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
    assert records[1]["memory_change"]["after"] == "Ada likes tea"  # its history
    assert [(r["role"], r["content"]) for r in records[2:]] == [
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
    line = next(x for x in out.getvalue().splitlines() if "deleted in 10 minutes): " in x)
    path = exported_path(line)
    assert path.is_relative_to(home / "exports" / "console-ada")
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[0]) == {
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


class FileSink(ListSink):
    """A sink that sends files as `StreamedReply` does: read when the reply finishes."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[Path] = []
        self.sent: list[tuple[str, bytes]] = []

    async def attach(self, path: Path) -> None:
        self.pending.append(path)

    async def finish(self) -> None:
        if self._pieces or self.pending:
            await super().finish()
        for path in self.pending:
            self.sent.append((path.name, path.read_bytes()))
        self.pending = []


def ada(text: str, user: str = ADA, chat_type: str = "private") -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id=user,
        chat_type=chat_type,  # type: ignore[arg-type]
        user_id=user,
        text=text,
    )


def exports(services: Services) -> list[Path]:
    root = services.config.home / "exports"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


async def test_a_sent_export_names_no_server_path_and_is_deleted_once_sent(
    services: Services, fake: FakeOpenAI
) -> None:
    conversations = serving(services)
    services.memory.apply("user", f"telegram-{ADA}", [Operation("add", content="Ada likes tea")])
    sink = FileSink()
    await conversations.handle(ada("/export"), sink)

    [reply] = sink.replies
    assert "attached" in reply and "(1 memory entry, 0 messages)" in reply
    assert str(services.config.home) not in reply and "/" + "exports" not in reply
    [(name, data)] = sink.sent
    assert name == f"mnemo-telegram-{ADA}.jsonl"
    first = json.loads(data.splitlines()[0])  # then its history, one change
    assert first == {"user": f"telegram-{ADA}", "memory_entry": "Ada likes tea"}
    assert exports(services) == []  # sent, so deleted: no copy stays on the server


async def test_a_second_export_within_the_minute_writes_nothing_and_says_when(
    services: Services, fake: FakeOpenAI
) -> None:
    conversations = serving(services)
    await say(conversations, "/export")  # the console's kind of sink: the file stays a while
    [first] = exports(services)
    before = first.stat()
    services.memory.apply("user", f"telegram-{ADA}", [Operation("add", content="Ada rows")])

    again = await say(conversations, "/export")

    assert again.startswith("You can export once a minute; try again in ")
    assert again.endswith(" seconds.") and "\n" not in again
    assert exports(services) == [first]
    assert (first.stat().st_mtime_ns, first.stat().st_ino) == (before.st_mtime_ns, before.st_ino)
    assert "Ada rows" not in first.read_text(encoding="utf-8")
    # another person is not held back by Ada's minute, and gets only their own data
    bob = await say(conversations, "/export", BOB)
    assert "(0 memory entries, 0 messages)" in bob
    assert "Ada" not in exported_path(bob).read_text(encoding="utf-8")


async def test_the_next_export_replaces_the_file_after_the_minute(services: Services) -> None:
    now = [1000.0]
    person = person_data(
        services.memory, services.skills, services.sessions, services.new_manager,
        services.config.home,
    )  # fmt: skip
    registry = CommandRegistry()
    registry.register(export_command(person, clock=lambda: now[0]))
    router = CommandRouter(registry, PendingChoices(), lambda platform, user: False)
    key = f"telegram-{ADA}"

    async def export() -> str:
        sink = ListSink()
        message = ada("/export")
        call = parse_command(message.text)
        assert call is not None
        await router.route(
            MessageIdentity.of(message), message, call, sink, services.locales.of_message(message)
        )
        await sink.finish()
        return sink.replies[0]

    await export()
    services.memory.apply("user", key, [Operation("add", content="Ada rows")])
    now[0] += 59.2
    assert "try again in 1 second." in await export()
    now[0] += 1.0
    assert "is in one file" in await export()
    [only] = exports(services)
    assert only == person.chat_export_path(key)
    assert "Ada rows" in only.read_text(encoding="utf-8")


async def test_forgetting_an_entry_deletes_the_pending_export_that_holds_it(
    services: Services,
) -> None:
    conversations = serving(services)
    key = f"telegram-{ADA}"
    services.memory.apply("user", key, [Operation("add", content="Ada sees Dr Okafor on Tuesdays")])
    path = exported_path(await say(conversations, "/export"))
    assert "Okafor" in path.read_text(encoding="utf-8")

    assert (await say(conversations, "/forget 1")).startswith("Forgotten: ")
    assert not path.exists()


async def test_exports_left_behind_are_swept_at_anyones_next_export(services: Services) -> None:
    conversations = serving(services)
    await say(conversations, "/export", BOB)
    bob = services.config.home / "exports" / f"telegram-{BOB}" / f"mnemo-telegram-{BOB}.jsonl"
    operator_copy = bob.with_name(f"telegram-{BOB}-20250101T000000Z.jsonl")  # `mnemo users export`
    operator_copy.write_text("{}\n", encoding="utf-8")
    stale = time.time() - 11 * 60
    os.utime(bob, (stale, stale))
    os.utime(operator_copy, (stale, stale))

    await say(conversations, "/export")

    assert not bob.exists()
    assert operator_copy.exists()  # the operator's own export is not a chat export
    assert {p.name for p in exports(services)} == {
        operator_copy.name,
        f"mnemo-telegram-{ADA}.jsonl",
    }


async def test_an_unsent_export_is_deleted_after_its_time(services: Services) -> None:
    person = person_data(
        services.memory, services.skills, services.sessions, services.new_manager,
        services.config.home,
    )  # fmt: skip
    registry = CommandRegistry()
    registry.register(export_command(person, keep_for=0.2))
    router = CommandRouter(registry, PendingChoices(), lambda platform, user: False)
    message = ada("/export")
    call = parse_command(message.text)
    assert call is not None
    locale = services.locales.of_message(message)
    await router.route(MessageIdentity.of(message), message, call, ListSink(), locale)
    path = person.chat_export_path(f"telegram-{ADA}")
    assert path.exists()
    await wait_until(lambda: not path.exists(), timeout=5)


async def test_telegram_gets_the_file_and_no_path_and_the_server_keeps_no_copy(
    services: Services,
) -> None:
    """The real adapter against the fake Bot API: what the person sees, then the disk."""
    services.memory.apply("user", f"telegram-{ADA}", [Operation("add", content="Ada likes tea")])
    async with FakeTelegram(token=TOKEN) as tg:
        config = TelegramConfig(
            token=TOKEN,
            base_url=tg.url + "/bot",
            base_file_url=tg.url + "/file/bot",
            allowed_users=("*",),
        )
        adapter = TelegramAdapter(config, poll_timeout=1, backoff=(0.01, 0.05))
        await adapter.start(serving(services), [])
        try:
            tg.inject_text(int(ADA), int(ADA), "/export")
            await tg.wait_until(lambda: tg.documents)
        finally:
            await adapter.close()
    [(chat, name, data)] = tg.documents
    assert (chat, name) == (int(ADA), f"mnemo-telegram-{ADA}.jsonl")
    assert json.loads(data.splitlines()[0])["memory_entry"] == "Ada likes tea"
    [text, document] = tg.chat_texts(int(ADA))  # the reply, then the file (no text)
    assert document is None
    assert text is not None and "attached" in text
    assert str(services.config.home) not in text and "exports" not in text
    assert exports(services) == []

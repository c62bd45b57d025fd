"""The lines a turn and a conversation write themselves, in the sender's language: shown
translated, stored in English (the model reads the stored ones in later turns)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from gateway.access import AccessPolicy
from gateway.agent.turn import EMPTY_NOTE, REFUSED_NOTE
from gateway.app import Services
from gateway.messages import InboundMessage
from gateway.pairing import AccessList
from gateway.turns import STOPPED_NOTE
from memory_core import FileDocument
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault
from tests.gateway.serving import serving, stored_rows
from tests.gateway.sinks import ListSink
from tests.timing import scaled


def message(
    text: str, user: str = "1", language: str | None = "zh-hans", message_id: str | None = None
) -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id=user,
        chat_type="private",
        user_id=user,
        text=text,
        message_id=message_id,
        language=language,
    )


async def reply(services: Services, msg: InboundMessage) -> str:
    sink = ListSink()
    await serving(services).handle(msg, sink)
    return sink.replies[-1]


async def test_a_note_is_shown_in_chinese_and_stored_in_english(
    fake: FakeOpenAI, services: Services
) -> None:
    fake.say("")
    fake.say("")
    assert await reply(services, message("你好?")) == "（模型返回了空回复）"
    assert await reply(services, message("hello?", "2", language=None)) == EMPTY_NOTE
    assert stored_rows(services, "1") == [("user", "你好?"), ("assistant", EMPTY_NOTE)]


async def test_a_fault_line_is_shown_in_the_persons_language_and_kept_in_english(
    fake: FakeOpenAI, services: Services
) -> None:
    fake.fail_next(Fault.http(400))
    shown = await reply(services, message("在吗?", message_id="5"))
    assert shown == "（模型服务拒绝了这个请求，运营者可以在日志中看到原因）"
    with sqlite3.connect(services.config.home / "state.db") as conn:
        notices = conn.execute("SELECT content, notice FROM messages").fetchall()
    assert notices == [("在吗?", REFUSED_NOTE)]


async def test_a_stopped_reply_says_so_in_spanish_and_the_session_keeps_english(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    fake.say("Había una vez una historia muy larga que nunca terminaba")
    fake.fail_next(Fault.stall(after=2))
    shown = ListSink()
    turn = asyncio.create_task(
        conversations.handle(message("cuéntame", language="es-ES", message_id="1"), shown)
    )
    await wait_until(lambda: fake.stalled == 1 and shown.unfinished.startswith("Hab"))
    stop = ListSink()
    await asyncio.wait_for(
        conversations.handle(message("/stop", language="es-ES"), stop), scaled(5)
    )
    await asyncio.wait_for(turn, scaled(5))
    fake.release()
    text = shown.replies[0]
    assert text.startswith("Hab") and text.endswith("\n\n(detenido)")
    kept = stored_rows(services, "1")[-1]
    assert kept[0] == "assistant" and str(kept[1]).endswith("\n\n" + STOPPED_NOTE)
    assert str(kept[1]).removesuffix(STOPPED_NOTE) == text.removesuffix("(detenido)")


async def test_a_refused_person_is_told_their_id_and_code_in_their_language(
    services: Services, tmp_path: Path
) -> None:
    granted = AccessList(FileDocument(tmp_path / "access.json"))
    access = AccessPolicy({"telegram": []}, granted=granted)
    conversations = serving(services, access=access)
    zh, en = ListSink(), ListSink()
    await conversations.handle(message("hi", "31"), zh)
    await conversations.handle(message("hi", "32", language=None), en)
    assert zh.replies[0].startswith("抱歉，这个机器人是私人的") and "31" in zh.replies[0]
    assert "mnemo users allow" in zh.replies[0]
    assert en.replies[0].startswith("Sorry, this bot is private") and "32" in en.replies[0]

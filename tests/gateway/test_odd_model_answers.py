"""A model server that answers oddly (issue 36): text before a tool call keeps a paragraph
break from the text after it, and a stream chunk that is not JSON is said in one
translated line, logged once without a traceback. Through the in-process service."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from gateway.agent.model_client import ModelClient
from gateway.agent.turn import UNREADABLE_NOTE
from gateway.app import Services
from gateway.errors import ModelUnreadableError
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall
from tests.gateway.serving import private, serving, stored_rows
from tests.gateway.sinks import ListSink


async def reply(services: Services, text: str, user: str = "1") -> str:
    sink = ListSink()
    await serving(services).handle(private(text, user), sink)
    return sink.replies[-1]


async def test_text_before_a_tool_call_is_a_paragraph_of_its_own(
    fake: FakeOpenAI, services: Services
) -> None:
    fake.call_tools(ToolCall("no_such_tool", {}), text="Let me note that.")
    fake.say("Done, noted.")
    shown = await reply(services, "note that I like tea")
    assert shown == "Let me note that.\n\nDone, noted."
    assistant = [content for role, content in stored_rows(services, "1") if role == "assistant"]
    assert assistant == ["Let me note that.", "Done, noted."]  # each step keeps its own text


async def test_a_break_already_written_is_not_doubled(fake: FakeOpenAI, services: Services) -> None:
    fake.call_tools(ToolCall("no_such_tool", {}), text="One moment.\n")
    fake.call_tools(ToolCall("no_such_tool", {}))  # a step that shows nothing
    fake.say("\nHere it is.")
    assert await reply(services, "look it up") == "One moment.\n\nHere it is."


async def test_a_chunk_that_is_not_json_is_not_retried(fake: FakeOpenAI) -> None:
    fake.say("never read", fault=Fault.garbage(after=1))
    fake.say("a second try would be read")
    model = ModelClient(fake.url + "/v1", "sk-test", "gpt-4o-mini", 10.0, stall_timeout=1.0)
    try:
        with pytest.raises(ModelUnreadableError, match="not JSON"):
            await model.stream_chat([{"role": "user", "content": "hello"}])
    finally:
        await model.close()
    assert len(fake.requests) == 1


async def test_a_chunk_that_is_not_json_is_said_in_one_line_and_logged_once(
    fake: FakeOpenAI, services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    fake.say("never read", fault=Fault.garbage(after=1))
    with caplog.at_level(logging.INFO):
        shown = await reply(services, "hello")
    assert shown == UNREADABLE_NOTE
    about = [r for r in caplog.records if "not JSON" in r.getMessage()]
    assert len(about) == 1 and about[0].exc_info is None
    assert not [r for r in caplog.records if r.exc_info is not None]


async def test_the_unreadable_line_is_in_the_persons_language(
    fake: FakeOpenAI, services: Services
) -> None:
    fake.say("never read", fault=Fault.garbage(after=1))
    sink = ListSink()
    await serving(services).handle(replace(private("你好", "2"), language="zh-hans"), sink)
    assert sink.replies[-1] == "（模型的服务器发来了我读不懂的内容，请稍后再试）"

"""A Bot API answer python-telegram-bot cannot parse (issue 36): the reply it answered is
taken as delivered, in one log line without a traceback; it is not sent again, the update
does not fail, and the next message is answered as usual."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.logs import PTB_REQUEST_LOGGER, not_unreadable_json
from tests.fakes.telegram import FakeTelegram
from tests.gateway.adapters.inboxes import Inbox
from tests.gateway.adapters.test_telegram_start_calls import COMMANDS, TOKEN, adapter_for


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as fake:
        yield fake


def answer_not_json(tg: FakeTelegram) -> None:
    tg.respond_next_text("sendMessage", "<html>200 OK</html>")


def answer_not_a_message(tg: FakeTelegram) -> None:
    tg.respond_next("sendMessage", {"ok": True, "result": True})


def answer_a_message_without_its_fields(tg: FakeTelegram) -> None:
    tg.respond_next("sendMessage", {"ok": True, "result": {"message_id": 9}})


@pytest.mark.parametrize(
    "odd", [answer_not_json, answer_not_a_message, answer_a_message_without_its_fields]
)
async def test_a_reply_answered_unreadably_is_sent_once_and_the_update_holds(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture, odd: Any
) -> None:
    inbox = Inbox()
    adapter: TelegramAdapter = adapter_for(tg)
    await adapter.start(inbox, COMMANDS)
    try:
        odd(tg)
        tg.inject_text(42, 42, "first")
        await tg.wait_until(lambda: len(tg.calls_to("sendMessage")) >= 1)
        tg.inject_text(42, 42, "second")
        await tg.wait_until(lambda: tg.chat_texts(42) == ["echo: second"])
    finally:
        await adapter.close()
    sends = [call.params.get("text") for call in tg.calls_to("sendMessage")]
    assert sends == ["echo: first", "echo: second"]  # the first is never sent again
    assert [m.text for m in inbox.messages] == ["first", "second"]  # each handled once
    ours = [r for r in caplog.records if r.name.startswith("gateway.")]
    assert not [r for r in ours if r.exc_info is not None]
    assert not [r for r in ours if "failed" in r.getMessage()]
    taken = [r for r in ours if "taken as delivered" in r.getMessage()]
    assert len(taken) == 1


def test_ptbs_traceback_for_an_answer_not_json_is_left_out_of_the_log() -> None:
    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord(PTB_REQUEST_LOGGER, logging.ERROR, "", 0, message, (), None)

    assert not not_unreadable_json(record('Can not load invalid JSON data: "<html>"'))
    assert not_unreadable_json(record("something else PTB says"))

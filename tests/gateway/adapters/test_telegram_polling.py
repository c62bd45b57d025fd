"""Long polling that cannot die silently: the real python-telegram-bot against the fake
Bot API answering ``getUpdates`` oddly, with unparseable updates, or refusing the token."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
from telegram.error import NetworkError, RetryAfter, TelegramError

from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.adapters.telegram_polling import Failures
from gateway.config import TelegramConfig
from gateway.messages import CommandSpec
from tests.fakes.telegram import FakeTelegram
from tests.gateway.adapters.inboxes import Inbox
from tests.timing import scaled

TOKEN = "123:ABC"
COMMANDS = [CommandSpec("help", "what the bot is")]
LOGGER = "gateway.adapters.telegram_polling"
HTML = "<html><body><h1>502 Bad Gateway</h1>" + "maintenance " * 100 + "</body></html>"
NO_FIRST_NAME = {"id": 77, "is_bot": False}  # PTB's User requires first_name


def _html(tg: FakeTelegram) -> None:
    tg.respond_next_text("getUpdates", HTML)


def _forbidden(tg: FakeTelegram) -> None:
    tg.fail_next("getUpdates", 403)


def _not_ok(tg: FakeTelegram) -> None:
    tg.respond_next("getUpdates", {"ok": False})


def _not_a_list(tg: FakeTelegram) -> None:
    tg.respond_next("getUpdates", {"ok": True, "result": {"update_id": 1}})


BAD_ANSWERS: dict[str, Callable[[FakeTelegram], None]] = {
    "a 200 with an HTML page": _html,
    "a 403": _forbidden,
    '{"ok": false}': _not_ok,
    "a result that is not a list": _not_a_list,
}


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as fake:
        yield fake


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger=LOGGER)
    return caplog


def _adapter(tg: FakeTelegram) -> TelegramAdapter:
    config = TelegramConfig(
        token=TOKEN,
        base_url=tg.url + "/bot",
        base_file_url=tg.url + "/file/bot",
        edit_interval=0.05,
        allowed_users=("*",),
    )
    return TelegramAdapter(config, poll_timeout=1, backoff=(0.01, 0.05))


@asynccontextmanager
async def running(tg: FakeTelegram, inbox: Inbox) -> AsyncIterator[TelegramAdapter]:
    adapter = _adapter(tg)
    await adapter.start(inbox, COMMANDS)
    try:
        yield adapter
    finally:
        await adapter.close()


def _lines(logs: pytest.LogCaptureFixture, words: str) -> list[str]:
    return [r.getMessage() for r in logs.records if words in r.getMessage()]


async def _answered(tg: FakeTelegram, chat_id: int, text: str) -> None:
    await tg.wait_until(lambda: f"echo: {text}" in tg.chat_texts(chat_id))


@pytest.mark.parametrize("bad", BAD_ANSWERS.values(), ids=BAD_ANSWERS.keys())
async def test_a_bad_answer_to_get_updates_is_survived_and_logged_once(
    tg: FakeTelegram, logs: pytest.LogCaptureFixture, bad: Callable[[FakeTelegram], None]
) -> None:
    async with running(tg, Inbox()) as adapter:
        await tg.wait_until(lambda: tg.held_polls)  # the first poll is waiting
        for _ in range(3):
            bad(tg)
        tg.inject_text(42, 42, "still there?")  # releases the held poll; three bad follow
        await _answered(tg, 42, "still there?")
        tg.inject_text(43, 43, "and me?")
        await _answered(tg, 43, "and me?")
        assert not adapter.done.is_set()
    statuses = [c.status for c in tg.calls_to("getUpdates")]
    assert len(statuses) >= 5
    assert len(_lines(logs, "polling failed")) == 1
    assert len(_lines(logs, "polling recovered")) == 1
    assert all(len(line) < 400 for line in _lines(logs, "polling failed"))  # no whole page


async def test_each_kind_is_logged_once_per_outage_and_again_after_a_recovery(
    tg: FakeTelegram, logs: pytest.LogCaptureFixture
) -> None:
    async with running(tg, Inbox()):
        await tg.wait_until(lambda: tg.held_polls)
        for bad in (_html, _forbidden, _html, _not_ok, _forbidden, _not_ok):
            bad(tg)
        tg.inject_text(42, 42, "one")  # releases the held poll; the six bad answers follow
        await _answered(tg, 42, "one")
        # the six were answered and the next poll waits: HTML for the poll after it
        await tg.wait_until(lambda: len(tg.calls_to("getUpdates")) >= 7 and tg.held_polls)
        _html(tg)
        tg.inject_text(42, 42, "two")
        await _answered(tg, 42, "two")
        tg.inject_text(42, 42, "three")
        await _answered(tg, 42, "three")
    failed = _lines(logs, "polling failed")
    assert len(failed) == 4  # HTML, 403, ok: false; then HTML again in a new outage
    assert "not JSON" in failed[0] and "Forbidden" in failed[1] and "no result" in failed[2]
    assert "not JSON" in failed[3]
    assert len(_lines(logs, "polling recovered")) == 2


async def test_a_poison_update_is_logged_confirmed_once_and_skipped(
    tg: FakeTelegram, logs: pytest.LogCaptureFixture
) -> None:
    inbox = Inbox()
    first = tg.inject_text(42, 77, "unreadable", **{"from": NO_FIRST_NAME})
    tg.inject_text(42, 42, "readable")
    last = tg.inject_text(43, 77, "unreadable too", **{"from": NO_FIRST_NAME})
    async with running(tg, inbox) as adapter:
        await _answered(tg, 42, "readable")
        await tg.wait_until(lambda: not tg.pending_updates)  # all three confirmed
        tg.inject_text(43, 43, "after")
        await _answered(tg, 43, "after")
        assert not adapter.done.is_set()
    assert [m.text for m in inbox.messages] == ["readable", "after"]
    assert set(tg.deliveries.values()) == {1}
    skipped = _lines(logs, "could not be read and is skipped")
    assert [str(first["update_id"]), str(last["update_id"])] == [s.split()[2] for s in skipped]
    assert not any("unreadable" in r.getMessage() for r in logs.records)  # ids, not content

    async with running(tg, Inbox()):  # a restart does not fetch them again
        tg.inject_text(44, 44, "later")
        await _answered(tg, 44, "later")
    assert tg.deliveries[first["update_id"]] == tg.deliveries[last["update_id"]] == 1


async def test_a_batch_of_only_a_poison_update_is_confirmed_by_the_next_poll(
    tg: FakeTelegram,
) -> None:
    async with running(tg, Inbox()):
        await tg.wait_until(lambda: tg.held_polls)
        poison = tg.inject_text(42, 77, "unreadable", **{"from": NO_FIRST_NAME})
        await tg.wait_until(lambda: not tg.pending_updates)
        confirming = await tg.wait_for("getUpdates", count=2)  # sent once the batch is done
        tg.inject_text(42, 42, "next")
        await _answered(tg, 42, "next")
    assert confirming.params["offset"] == poison["update_id"] + 1
    assert tg.deliveries[poison["update_id"]] == 1


@pytest.mark.parametrize("status", [401, 404])
async def test_a_token_refused_while_polling_ends_the_adapter(
    tg: FakeTelegram, logs: pytest.LogCaptureFixture, status: int
) -> None:
    adapter = _adapter(tg)
    await adapter.start(Inbox(), COMMANDS)
    try:
        await tg.wait_until(lambda: tg.held_polls)
        assert not adapter.done.is_set()
        tg.fail_next("getUpdates", status, description="Unauthorized")
        tg.inject_text(42, 42, "anyone?")  # answers the held poll; the next one is refused
        await asyncio.wait_for(adapter.done.wait(), scaled(5))
        await _answered(tg, 42, "anyone?")
    finally:
        await adapter.close()
    assert len(_lines(logs, "token was refused while polling")) == 1
    *_, refused, confirmed = tg.calls_to("getUpdates")
    assert refused.status == status
    assert confirmed.params["timeout"] == 0  # close() confirming "anyone?", no more polls
    assert tg.pending_updates == []


def test_the_backoff_doubles_up_to_its_cap_and_retry_after_is_capped_too() -> None:
    now = [0.0]
    failures = Failures(lambda: now[0], 0.5, 4.0)
    waits = [failures.failed(NetworkError("down")) for _ in range(6)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert failures.failed(RetryAfter(dt.timedelta(hours=1))) == 4.0
    assert failures.failed(RetryAfter(dt.timedelta(seconds=2))) == 2.0
    failures.recovered()
    assert failures.failed(TelegramError("the answer was not JSON")) == 0.5


def test_only_the_first_failure_of_a_kind_is_logged(logs: pytest.LogCaptureFixture) -> None:
    failures = Failures(lambda: 0.0, 0.5, 4.0)
    for error in (NetworkError("a"), NetworkError("b"), KeyError("x"), KeyError("y")):
        failures.failed(error)
    failed = [r for r in logs.records if "polling failed" in r.getMessage()]
    assert [bool(r.exc_info) for r in failed] == [False, True]  # a traceback for the odd one

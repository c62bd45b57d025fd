"""Webhook mode: the real python-telegram-bot adapter, the fake Telegram POSTing updates.

Each replica is a `TelegramAdapter` listening on its own port; the fake delivers every
update to one of them in turn and retries on the next until one answers 200.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.config import TelegramConfig
from gateway.errors import AdapterFailedError
from gateway.messages import CommandSpec
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_webhook import Attempt
from tests.gateway.adapters.inboxes import Inbox
from tests.timing import wait_until

TOKEN = "123:ABC"
SECRET = "s3cret-Token_1"
COMMANDS = [CommandSpec("help", "what the bot is")]
ALICE, BOB = 42, 77


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def hook_url() -> str:
    return f"http://127.0.0.1:{_free_port()}/tg/hook"


async def eventually(probe: Callable[[], object], timeout: float = 5.0) -> None:
    """Wait until `probe()` is truthy (for what no fake is told of, such as a log line)."""
    await wait_until(probe, timeout)


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN, webhook_backoff=0.01) as fake:
        yield fake


def _config(tg: FakeTelegram, url: str) -> TelegramConfig:
    port = int(url.split(":")[2].split("/")[0])
    return TelegramConfig(
        token=TOKEN,
        base_url=tg.url + "/bot",
        base_file_url=tg.url + "/file/bot",
        edit_interval=0.05,
        allowed_users=("*",),
        webhook={"url": url, "listen": "127.0.0.1", "port": port},
        webhook_secret=SECRET,
    )


@asynccontextmanager
async def replica(
    tg: FakeTelegram, inbox: Any, url: str, **options: Any
) -> AsyncIterator[TelegramAdapter]:
    adapter = TelegramAdapter(_config(tg, url), **options)
    await adapter.start(inbox, COMMANDS)
    try:
        yield adapter
    finally:
        await adapter.close()


async def test_a_message_is_answered_and_the_webhook_stays_set_at_stop(
    tg: FakeTelegram,
) -> None:
    url = hook_url()
    tg.webhook_targets = [url]
    inbox = Inbox()
    async with replica(tg, inbox, url):
        [set_webhook] = tg.calls_to("setWebhook")
        assert set_webhook.params["url"] == url
        assert set_webhook.params["secret_token"] == SECRET
        allowed = ["message", "edited_message", "callback_query"]
        assert set_webhook.params["allowed_updates"] == allowed
        sent = tg.inject_text(ALICE, ALICE, "hello over the webhook")
        await tg.wait_until(lambda: tg.chat_texts(ALICE) == ["echo: hello over the webhook"])
    assert tg.webhook_attempts == [Attempt(sent["update_id"], url, 200)]
    assert [m.text for m in inbox.messages] == ["hello over the webhook"]
    assert tg.calls_to("getUpdates") == [] and tg.calls_to("deleteWebhook") == []
    assert tg.webhook["url"] == url  # other replicas still serve it


async def test_only_telegrams_well_formed_updates_are_handled(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    url, inbox = hook_url(), Inbox()
    caplog.set_level(logging.INFO)
    async with replica(tg, inbox, url), aiohttp.ClientSession() as http:
        update = tg.inject_text(ALICE, ALICE, "forged")  # not delivered: no targets
        answers = []
        for headers in ({}, {"X-Telegram-Bot-Api-Secret-Token": SECRET[:-1] + "2"}):
            async with http.post(url, json=update, headers=headers) as answer:
                answers.append(answer.status)
        right = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        async with http.post(url, data=b"<html>", headers=right) as answer:
            answers.append(answer.status)
        poison = {"update_id": 999, "message": {"message_id": 1, "text": "private words"}}
        async with http.post(url, json=poison, headers=right) as answer:
            answers.append(answer.status)
    assert answers == [403, 403, 400, 200]  # the unparsable update: skipped, not retried
    assert inbox.messages == [] and tg.chat_texts(ALICE) == []
    logged = caplog.text
    assert "update 999 could not be read and is skipped" in logged
    assert "private words" not in logged and SECRET not in logged


async def test_200_only_once_stored_and_a_failure_before_is_retried_on_the_next_replica(
    tg: FakeTelegram,
) -> None:
    """Alice's update reaches a replica that crashes before storing it (503); the fake
    retries on the other, which answers. Bob's, meanwhile, is answered at once."""
    first, second = hook_url(), hook_url()
    tg.webhook_targets = [first, second]
    crashing, healthy = Inbox(), Inbox()
    crashing.stall, crashing.fail_after_stall = asyncio.Event(), True
    async with replica(tg, crashing, first), replica(tg, healthy, second):
        alice = tg.inject_text(ALICE, ALICE, "kept after all")
        await tg.wait_until(lambda: crashing.messages)
        assert tg.webhook_attempts == []  # not stored: not answered yet
        bob = tg.inject_text(BOB, BOB, "meanwhile")  # the next target: the healthy one
        await tg.wait_until(lambda: tg.chat_texts(BOB) == ["echo: meanwhile"])
        crashing.stall.set()
        await tg.wait_until(lambda: tg.chat_texts(ALICE) == ["echo: kept after all"])
    assert tg.webhook_attempts == [
        Attempt(bob["update_id"], second, 200),
        Attempt(alice["update_id"], first, 503),
        Attempt(alice["update_id"], second, 200),
    ]
    assert [m.text for m in healthy.messages] == ["meanwhile", "kept after all"]


async def test_a_stopping_replica_answers_503_and_another_takes_the_update(
    tg: FakeTelegram,
) -> None:
    """One replica is stopping, one is gone (nothing listens), one serves: each update
    ends on the serving one, answered once."""
    stopping, gone, serving = hook_url(), hook_url(), hook_url()
    tg.webhook_targets = [stopping, gone, serving]
    idle, inbox = Inbox(), Inbox()
    async with replica(tg, idle, stopping) as leaving, replica(tg, inbox, serving):
        await leaving.stop()
        assert not leaving.ready.is_set()
        alice = tg.inject_text(ALICE, ALICE, "one")
        bob = tg.inject_text(BOB, BOB, "two")
        await tg.wait_until(lambda: tg.chat_texts(ALICE) and tg.chat_texts(BOB))
    statuses = {(a.update_id, a.target): a.status for a in tg.webhook_attempts}
    assert statuses[(alice["update_id"], stopping)] == 503
    for update in (alice, bob):
        assert tg.webhook_answered(update["update_id"]) == 1
        assert statuses.get((update["update_id"], gone)) is None
        assert statuses[(update["update_id"], serving)] == 200
    assert idle.messages == []
    assert (tg.chat_texts(ALICE), tg.chat_texts(BOB)) == (["echo: one"], ["echo: two"])


async def test_an_update_not_stored_in_time_is_answered_503_and_retried(
    tg: FakeTelegram,
) -> None:
    slow_url, fast_url = hook_url(), hook_url()
    tg.webhook_targets = [slow_url, fast_url]
    slow, fast = Inbox(), Inbox()
    slow.stall = asyncio.Event()  # never released: a store that hangs
    async with (
        replica(tg, slow, slow_url, store_timeout=0.2),
        replica(tg, fast, fast_url),
    ):
        sent = tg.inject_text(ALICE, ALICE, "hello")
        await tg.wait_until(lambda: tg.chat_texts(ALICE) == ["echo: hello"])
        slow.fail_after_stall = True  # the hung store gives up at last, keeping nothing
        slow.stall.set()
    assert tg.webhook_attempts == [
        Attempt(sent["update_id"], slow_url, 503),
        Attempt(sent["update_id"], fast_url, 200),
    ]


async def test_an_update_delivered_twice_to_a_replica_is_handled_once(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    """Bob's burst is each delivered twice, the copy while the first is being handled
    (held before it is stored) or after it was; Alice's single message is not held up."""
    caplog.set_level(logging.INFO)
    url = hook_url()
    tg.webhook_targets = [url]
    inbox = Inbox()
    inbox.stall = asyncio.Event()
    async with replica(tg, inbox, url):
        burst = [tg.inject_text(BOB, BOB, f"b{i}") for i in range(4)]
        await tg.wait_until(lambda: inbox.messages)  # b0 held, not stored
        tg.deliver_again(burst[0])  # while the first copy is held
        await eventually(lambda: "delivered again" in caplog.text)
        inbox.stall.set()
        await tg.wait_until(lambda: len(tg.chat_texts(BOB)) == 4)
        for update in burst[1:]:
            tg.deliver_again(update)  # after it was stored
        tg.inject_text(ALICE, ALICE, "hi")
        await tg.wait_until(
            lambda: (
                tg.chat_texts(ALICE)
                and all(tg.webhook_answered(u["update_id"]) == 2 for u in burst)
            )
        )
    assert tg.chat_texts(BOB) == ["echo: b0", "echo: b1", "echo: b2", "echo: b3"]
    assert [m.text for m in inbox.messages if m.user_id == str(BOB)] == ["b0", "b1", "b2", "b3"]
    assert caplog.text.count("delivered again; handled once") == 4


async def test_an_address_taken_is_one_clear_error_and_no_webhook_is_set(
    tg: FakeTelegram,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        url = f"http://127.0.0.1:{taken.getsockname()[1]}/tg/hook"
        adapter = TelegramAdapter(_config(tg, url))
        refused = r"cannot listen for the webhook on 127\.0\.0\.1:"
        with pytest.raises(AdapterFailedError, match=refused):
            await adapter.start(Inbox(), COMMANDS)
        await adapter.close()
    assert tg.calls_to("setWebhook") == [] and not adapter.ready.is_set()

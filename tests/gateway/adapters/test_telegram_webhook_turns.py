"""Webhook deliveries through the real conversations: an update given to two replicas
is stored once and answered once, also while its first copy only waits in the queue.

Two webhook adapters (two replicas' listeners) serve one `Conversations` over one
store, the fake model echoing; the fake Telegram delivers each update to them in turn
and a copy of each of Bob's to the other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.app import Services
from gateway.conversation import Conversations
from gateway.session_queue import decode
from tests.fakes.openai import FakeOpenAI, Fault
from tests.fakes.telegram import FakeTelegram
from tests.gateway.adapters.test_telegram_webhook import (
    ALICE,
    BOB,
    eventually,
    hook_url,
    replica,
)
from tests.gateway.serving import serving, stored_rows


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token="123:ABC", webhook_backoff=0.01) as fake:
        yield fake


async def test_a_burst_delivered_twice_is_stored_once_and_answered_once_in_order(
    tg: FakeTelegram, fake: FakeOpenAI, services: Services
) -> None:
    """Bob's first turn is slow (the model holds it), so the rest of his burst waits in
    the session queue; every one of his updates is delivered again to the other replica
    while its first copy is queued. Alice is answered meanwhile."""
    fake.echo_when_idle = True
    conversations: Conversations = serving(services)
    first, second = hook_url(), hook_url()
    tg.webhook_targets = [first, second]
    fake.fail_next(Fault.stall())  # Bob's first turn
    async with replica(tg, conversations, first), replica(tg, conversations, second):
        burst = [tg.inject_text(BOB, BOB, "b0")]
        await tg.wait_until(lambda: tg.webhook_answered(burst[0]["update_id"]))  # stored
        await eventually(lambda: fake.stalled == 1)  # b0's turn: the model holds it
        burst += [tg.inject_text(BOB, BOB, f"b{i}") for i in range(1, 4)]
        await tg.wait_until(lambda: all(tg.webhook_answered(u["update_id"]) for u in burst))
        answered_by = {a.update_id: a.target for a in tg.webhook_attempts}
        for update in burst:  # each first copy is in its session or queued: copies now
            other = second if answered_by[update["update_id"]] == first else first
            tg.deliver_again(update, other)  # to the other replica
        await tg.wait_until(lambda: all(tg.webhook_answered(u["update_id"]) == 2 for u in burst))
        tg.inject_text(ALICE, ALICE, "hi")
        await tg.wait_until(lambda: tg.chat_texts(ALICE) == ["echo: hi"])  # not held up
        assert tg.chat_texts(BOB) == []
        queued = await services.sessions.queued_messages("telegram")
        assert {decode(q.payload).text for q in queued} == {"b0", "b1", "b2", "b3"}
        fake.release()
        await tg.wait_until(lambda: len(tg.chat_texts(BOB)) == 4)
        assert await conversations.drain(10)
    assert tg.chat_texts(BOB) == ["echo: b0", "echo: b1", "echo: b2", "echo: b3"]
    rows = stored_rows(services, str(BOB))
    assert [content for role, content in rows if role == "user"] == ["b0", "b1", "b2", "b3"]
    assert await services.sessions.queued_messages("telegram") == []  # every copy left

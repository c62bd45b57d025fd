"""No chat waits on another: a busy session's follow-up is kept in the queue at once.

Two people in every test: Alice's reply is stalled at the model (or her burst is
long) while Bob, who is idle, writes. What is checked: when each message is
confirmed to the platform (`on_stored`), who got which reply, and what state.db
holds, in order.
"""

from __future__ import annotations

import asyncio
import time

from gateway.app import Services
from gateway.messages import InboundMessage, MessageIdentity
from gateway.service import answer_unanswered
from gateway.session_queue import SessionQueue, decode, encode
from memory_core import NewMessage, SessionOrigin
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault
from tests.gateway.serving import private as message
from tests.gateway.serving import serving
from tests.gateway.serving import stored_rows as rows
from tests.gateway.sinks import ListSink
from tests.timing import scaled


async def test_a_follow_up_is_confirmed_while_the_reply_before_it_is_stalled(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    fake.fail_next(Fault.stall())
    first, second = ListSink(), ListSink()
    turn_one = asyncio.create_task(conversations.handle(message("one", "1", "11"), first))
    await wait_until(lambda: fake.stalled == 1)

    follow_up_stored = asyncio.Event()
    turn_two = asyncio.create_task(
        conversations.handle(message("two", "1", "12"), second, follow_up_stored.set)
    )
    await asyncio.wait_for(follow_up_stored.wait(), scaled(5))  # confirmed while "one" is stalled
    assert fake.stalled == 1
    waiting = await SessionQueue(services.sessions).waiting("telegram")
    assert [w.message.text for w in waiting] == ["two"]

    fake.say("Hi Bob.")  # Bob, idle, is answered while Alice's reply is still stalled
    bob = ListSink()
    await asyncio.wait_for(conversations.handle(message("hi", "2", "21"), bob), scaled(5))
    assert bob.replies == ["Hi Bob."]
    assert fake.stalled == 1 and not turn_one.done()

    fake.say("Answer one.")
    fake.say("Answer two.")
    fake.release()
    await asyncio.wait_for(asyncio.gather(turn_one, turn_two), scaled(5))
    assert first.replies == ["Answer one."] and second.replies == ["Answer two."]
    assert rows(services, "1") == [  # in the order they were said
        ("user", "one"),
        ("assistant", "Answer one."),
        ("user", "two"),
        ("assistant", "Answer two."),
    ]
    assert await SessionQueue(services.sessions).waiting("telegram") == []


async def test_a_burst_is_confirmed_at_once_and_answered_in_order(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    fake.fail_next(Fault.stall())
    sinks = [ListSink() for _ in range(6)]
    confirmed = [asyncio.Event() for _ in sinks]
    tasks = [
        asyncio.create_task(
            conversations.handle(message(f"m{n}", "1", str(100 + n)), sinks[n], confirmed[n].set)
        )
        for n in range(len(sinks))
    ]
    await wait_until(lambda: fake.stalled == 1)
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in confirmed)), scaled(5))
    assert fake.stalled == 1  # every one confirmed while the first reply is held

    for n in range(len(sinks)):
        fake.say(f"a{n}")
    fake.release()
    await asyncio.wait_for(asyncio.gather(*tasks), scaled(10))
    assert [s.replies for s in sinks] == [[f"a{n}"] for n in range(len(sinks))]
    stored = rows(services, "1")
    assert stored == [
        pair for n in range(6) for pair in (("user", f"m{n}"), ("assistant", f"a{n}"))
    ]


async def test_a_queued_message_left_by_a_stop_is_answered_at_the_next_start(
    fake: FakeOpenAI, services: Services
) -> None:
    first_run = serving(services)
    fake.fail_next(Fault.stall())
    turn_one = asyncio.create_task(first_run.handle(message("one", "1", "11"), ListSink()))
    await wait_until(lambda: fake.stalled == 1)
    stored = asyncio.Event()
    turn_two = asyncio.create_task(
        first_run.handle(message("two", "1", "12"), ListSink(), stored.set)
    )
    await asyncio.wait_for(stored.wait(), scaled(5))
    for task in (turn_one, turn_two):  # the process stops: "one" is stored, "two" queued
        task.cancel()
    await asyncio.gather(turn_one, turn_two, return_exceptions=True)
    await first_run.close()
    fake.release()
    await wait_until(lambda: fake.stalled == 0)

    fake.say("Answer one.")
    fake.say("Answer two.")
    restarted = serving(services)
    sinks: dict[str | None, ListSink] = {}

    def sink_for(to: InboundMessage) -> ListSink:
        return sinks.setdefault(to.message_id, ListSink())

    assert await answer_unanswered(restarted, services.sessions, "telegram", sink_for) == 2
    assert sinks["11"].replies == ["Answer one."] and sinks["12"].replies == ["Answer two."]
    assert await answer_unanswered(restarted, services.sessions, "telegram", sink_for) == 0
    assert [role for role, _ in rows(services, "1")] == ["user", "assistant"] * 2


async def test_erasing_a_person_empties_their_queue_and_nobody_elses(services: Services) -> None:
    queue = SessionQueue(services.sessions)
    for user in ("1", "2"):
        msg = message("secret", user, "9")
        await queue.put(MessageIdentity.of(msg), msg)
    await services.sessions.delete_user("telegram-1")
    assert [w.message.user_id for w in await queue.waiting("telegram")] == ["2"]


def test_a_message_survives_the_queue_whole() -> None:
    msg = InboundMessage(
        platform="discord",
        chat_id="5",
        chat_type="group",
        user_id="7",
        text="lone \ud800 surrogate, emoji 🦜, 中文",
        message_id="8",
        thread_id="9",
        reply_to_id="3",
        bot_username="mnemo_bot",
    )
    assert decode(encode(msg)) == msg


async def test_a_message_both_stored_and_still_queued_is_answered_once(
    fake: FakeOpenAI, services: Services
) -> None:
    """A stop between storing a queued message and dropping it leaves it in both places."""
    msg = message("in both", "1", "31")
    who = MessageIdentity.of(msg)
    await SessionQueue(services.sessions).put(who, msg)
    origin = SessionOrigin(
        session_key=who.session_key,
        source="telegram",
        user_key=who.user_key,
        chat_id=who.chat_id,
        chat_type=who.chat_type,
    )
    asked = NewMessage("user", "in both", time.time(), platform_message_id="31", key="t:0")
    await services.sessions.append_messages(origin=origin, messages=[asked])

    fake.say("Once.")
    sinks: list[ListSink] = []

    def sink_for(to: InboundMessage) -> ListSink:
        sinks.append(ListSink())
        return sinks[-1]

    conversations = serving(services)
    assert await answer_unanswered(conversations, services.sessions, "telegram", sink_for) == 1
    assert [s.replies for s in sinks] == [["Once."]]
    assert await SessionQueue(services.sessions).waiting("telegram") == []
    assert rows(services, "1") == [("user", "in both"), ("assistant", "Once.")]

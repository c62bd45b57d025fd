"""What adapters rely on from Conversations: access first, on_stored, redelivery,
answering after a restart, chats that move, and a bounded drain."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path

from gateway.access import REFUSAL_INTERVAL, AccessPolicy
from gateway.agent.turn import REFUSED_NOTE
from gateway.answering import EMPTY_LINE, UNSUPPORTED_LINE
from gateway.app import Services
from gateway.messages import InboundMessage
from gateway.service import answer_unanswered
from memory_core import SearchScope
from tests.clock import Clock
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink
from tests.timing import scaled


def message(
    text: str,
    user: str = "42",
    chat: str | None = None,
    message_id: str | None = None,
    group: bool = False,
) -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id=chat or user,
        chat_type="group" if group else "private",
        user_id=user,
        text=text,
        message_id=message_id,
        user_name=f"User {user}",
    )


def rows(services: Services, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(services.config.home / "state.db") as conn:
        return conn.execute(sql).fetchall()


async def test_a_refused_person_is_told_their_id_once_an_hour_and_nothing_is_kept(
    fake: FakeOpenAI, services: Services
) -> None:
    clock = Clock()
    access = AccessPolicy({"telegram": ["1"]}, clock=clock)
    conversations = serving(services, access=access)
    sink = ListSink()
    confirmed: list[str] = []
    await conversations.handle(message("hello", user="666"), sink, lambda: confirmed.append("x"))
    await conversations.handle(message("/memory", user="666"), sink)
    await conversations.handle(message("again", user="666"), sink)
    clock.now += REFUSAL_INTERVAL
    await conversations.handle(message("later", user="666"), sink)
    await conversations.choose(message("", user="666"), "choice:forged", sink)

    told = [reply for reply in sink.replies if reply]
    assert len(told) == 2  # the first refusal, and the one an hour later
    assert all("666" in reply and "telegram.allowed_users" in reply for reply in told)
    assert confirmed == ["x"]  # the update is confirmed: there is nothing to keep
    assert fake.requests == []
    assert rows(services, "SELECT count(*) FROM sessions") == [(0,)]
    assert not (services.config.home / "memories" / "users" / "telegram-666").exists()


async def test_star_serves_everyone_and_admins_are_always_served(
    fake: FakeOpenAI, services: Services
) -> None:
    fake.say("Hi there.")
    fake.say("Hello admin.")
    everyone = serving(services, access=AccessPolicy({"telegram": ["*"]}))
    sink = ListSink()
    await everyone.handle(message("hi", user="7"), sink)
    nobody = serving(services, access=AccessPolicy({"telegram": []}, admins=["telegram:9"]))
    await nobody.handle(message("hi", user="9"), sink)
    await nobody.handle(message("hi", user="8"), sink)
    assert sink.replies[:2] == ["Hi there.", "Hello admin."]
    assert "8" in sink.replies[2] and "allowed_users" in sink.replies[2]


async def test_on_stored_fires_once_the_message_is_stored_before_the_answer(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    fake.fail_next(Fault.stall())  # the model hangs: the message is stored all the same
    fake.say("Finally.")
    stored = asyncio.Event()
    turn = asyncio.create_task(
        conversations.handle(message("remember me", message_id="m1"), ListSink(), stored.set)
    )
    await asyncio.wait_for(stored.wait(), scaled(5))
    assert not turn.done()
    assert rows(services, "SELECT content FROM messages") == [("remember me",)]
    await wait_until(lambda: fake.stalled == 1)  # the model was asked after it was stored
    fake.release()
    await asyncio.wait_for(turn, scaled(10))


async def test_a_message_delivered_twice_is_stored_and_answered_once(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    fake.say("Once.")
    sink = ListSink()
    await conversations.handle(message("hello", message_id="77"), sink)
    await conversations.handle(message("hello", message_id="77"), sink)  # redelivered
    assert sink.replies == ["Once.", ""]
    assert len(fake.requests) == 1
    assert rows(services, "SELECT role, content FROM messages ORDER BY id") == [
        ("user", "hello"),
        ("assistant", "Once."),
    ]


async def test_a_message_stored_but_never_answered_is_answered_after_a_restart(
    fake: FakeOpenAI, services: Services
) -> None:
    first_run = serving(services)
    fake.fail_next(Fault.stall())
    stored = asyncio.Event()
    turn = asyncio.create_task(
        first_run.handle(message("are you there?", message_id="5"), ListSink(), stored.set)
    )
    await asyncio.wait_for(stored.wait(), scaled(5))
    await wait_until(lambda: fake.stalled == 1)
    turn.cancel()  # the process stops mid-turn
    await asyncio.gather(turn, return_exceptions=True)
    await first_run.close()
    fake.release()
    await wait_until(lambda: fake.stalled == 0)

    fake.say("Yes, here.")
    restarted = serving(services)
    sinks: list[ListSink] = []

    def sink_for(to: InboundMessage) -> ListSink:
        assert (to.chat_id, to.user_id, to.message_id) == ("42", "42", "5")
        sinks.append(ListSink())
        return sinks[-1]

    assert await answer_unanswered(restarted, services.sessions, "telegram", sink_for) == 1
    assert sinks[0].replies == ["Yes, here."]
    assert (
        await answer_unanswered(restarted, services.sessions, "telegram", sink_for) == 0
    )  # answered now
    assert rows(services, "SELECT role, content FROM messages ORDER BY id") == [
        ("user", "are you there?"),
        ("assistant", "Yes, here."),
    ]


async def test_a_group_that_becomes_a_supergroup_keeps_its_sessions(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    fake.say("Noted, the deploy is on Friday.")
    fake.say("It is on Friday.")
    sink = ListSink()
    await conversations.handle(message("deploy is friday", chat="-100", group=True), sink)
    await conversations.chat_migrated("telegram", "-100", "-100200")
    await conversations.handle(message("when is the deploy?", chat="-100200", group=True), sink)

    keys = rows(services, "SELECT session_key, chat_id, ended_at FROM sessions")
    assert keys == [("telegram:group:-100200:42", "-100200", None)]  # one session, moved
    second = fake.requests[1].body["messages"]
    assert any(m["content"] == "deploy is friday" for m in second)  # the conversation went on
    hits = await services.sessions.search(
        "deploy", SearchScope(user_key="telegram-42", chat_id="-100200")
    )
    assert len(hits) == 1


async def test_drain_waits_for_turns_in_flight_within_its_bound(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    assert await conversations.drain(0.01)  # nothing in flight
    fake.fail_next(Fault.stall())
    fake.say("Done.")
    stored = asyncio.Event()
    turn = asyncio.create_task(conversations.handle(message("slow"), ListSink(), stored.set))
    await asyncio.wait_for(stored.wait(), scaled(5))
    await wait_until(lambda: fake.stalled == 1)
    assert not await conversations.drain(0.05)  # still answering
    fake.release()
    assert await conversations.drain(5)
    assert turn.done()


async def test_unreadable_or_empty_messages_get_one_line_after_the_access_check(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services, access=AccessPolicy({"telegram": ["42"]}))
    sink = ListSink()
    sticker = replace(message(""), unsupported=True)
    await conversations.handle(sticker, sink)
    await conversations.handle(message("   "), sink)  # a bare mention, the mention cut
    await conversations.handle(replace(sticker, user_id="13", chat_id="13"), sink)  # refused
    assert sink.replies[:2] == [UNSUPPORTED_LINE, EMPTY_LINE]
    assert "13" in sink.replies[2] and "allowed_users" in sink.replies[2]
    assert fake.requests == []
    assert rows(services, "SELECT count(*) FROM sessions") == [(0,)]


class FileSink(ListSink):
    """A sink of a platform that sends files (a `DocumentSink`)."""

    def __init__(self) -> None:
        super().__init__()
        self.files: list[Path] = []

    async def attach(self, path: Path) -> None:
        self.files.append(path)


async def test_export_sends_its_file_where_the_platform_sends_files(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    files, plain = FileSink(), ListSink()
    await conversations.handle(message("/export"), files)
    await conversations.handle(message("/export"), plain)  # within the minute: refused
    assert len(files.files) == 1 and "attached" in files.replies[0]
    assert str(files.files[0].parent) not in files.replies[0]  # no server path
    assert not files.files[0].exists()  # sent, then deleted
    assert "once a minute" in plain.replies[0]


async def test_a_message_answered_by_a_fault_line_is_not_answered_again_after_a_restart(
    fake: FakeOpenAI, services: Services
) -> None:
    first_run = serving(services)
    fake.fail_next(Fault.http(400))
    sink = ListSink()
    await first_run.handle(message("are you there?", message_id="5"), sink)
    assert sink.replies == [REFUSED_NOTE]  # what the person saw: the fault line
    await first_run.close()

    fake.say("Yes, here.")  # the model works again
    restarted = serving(services)
    sinks: list[ListSink] = []

    def sink_for(to: InboundMessage) -> ListSink:
        sinks.append(ListSink())
        return sinks[-1]

    assert await answer_unanswered(restarted, services.sessions, "telegram", sink_for) == 0
    assert sinks == [] and len(fake.requests) == 1  # nobody was asked or told anything
    assert rows(services, "SELECT role, content, notice FROM messages ORDER BY id") == [
        ("user", "are you there?", REFUSED_NOTE)
    ]


async def test_the_fault_line_is_never_sent_to_the_model(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    fake.fail_next(Fault.http(400))
    fake.say("Sorry about that. Hello!")
    sink = ListSink()
    await conversations.handle(message("hello?", message_id="1"), sink)
    await conversations.handle(message("hello again", message_id="2"), sink)
    assert sink.replies == [REFUSED_NOTE, "Sorry about that. Hello!"]
    sent = [(m["role"], m["content"]) for m in fake.requests[1].body["messages"][1:]]
    assert sent[0] == ("user", "hello?")  # the history as before: no line in between
    assert sent[1][0] == "user" and sent[1][1].startswith("hello again")
    assert len(sent) == 2


async def test_a_message_with_lone_surrogates_is_stored_and_answered(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = serving(services)
    fake.say("Got it.")
    sink = ListSink()
    stored = asyncio.Event()
    await conversations.handle(
        message("half an emoji \ud83d and \udc00 more", message_id="9"), sink, stored.set
    )
    assert stored.is_set()
    assert sink.replies == ["Got it."]
    kept = "half an emoji \ufffd and \ufffd more"
    assert rows(services, "SELECT role, content FROM messages ORDER BY id") == [
        ("user", kept),
        ("assistant", "Got it."),
    ]
    asked = fake.requests[0].body["messages"][-1]["content"]
    assert asked.startswith(kept)  # the model read what the store keeps

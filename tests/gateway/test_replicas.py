"""Two replicas on one PostgreSQL: each a full `Conversations` stack with its own model.

Every reply goes to one shared record of the chats, whichever replica sends it (as
every replica's Telegram adapter sends to the same chat), so a test sees what a
person sees: their replies, in order, each once.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gateway.adapters.console_adapter import ConsoleAdapter
from gateway.app import Services, open_services
from gateway.config import load_config
from gateway.conversation import Conversations
from gateway.messages import InboundMessage, ReplySink
from gateway.service import Service, instance_lock
from gateway.session_queue import encode
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault
from tests.gateway.serving import SKILLS, private, serving
from tests.timing import scaled


@dataclass
class Chats:
    """What each chat was sent, by chat id, in delivery order (any replica)."""

    replies: dict[str, list[str]] = field(default_factory=dict)

    def sink_for(self, message: InboundMessage) -> ReplySink:
        return _ChatSink(self, message.chat_id)


class _ChatSink:
    def __init__(self, chats: Chats, chat_id: str) -> None:
        self._chats, self._chat_id, self._pieces = chats, chat_id, list[str]()

    async def write(self, piece: str) -> None:
        self._pieces.append(piece)

    async def finish(self) -> None:
        if self._pieces:
            self._chats.replies.setdefault(self._chat_id, []).append("".join(self._pieces))
        self._pieces = []


@dataclass
class Replica:
    model: FakeOpenAI
    services: Services
    conversations: Conversations
    stack: contextlib.AsyncExitStack

    async def send(self, chats: Chats, message: InboundMessage) -> asyncio.Task[None]:
        """Hand `message` to this replica; the task, once the platform was told it is kept."""
        stored = asyncio.Event()
        task = asyncio.create_task(
            self.conversations.handle(message, chats.sink_for(message), stored.set)
        )
        await asyncio.wait_for(stored.wait(), scaled(5))
        return task

    async def die(self) -> None:
        """Close its stores: its connections close, and the server releases its locks."""
        await self.stack.aclose()


async def _replica(name: str, pg_database: str, tmp_path: Path, chats: Chats) -> Replica:
    stack = contextlib.AsyncExitStack()
    model = await stack.enter_async_context(FakeOpenAI(chunk_size=64, echo_when_idle=True))
    env = {
        "OPENAI_BASE_URL": model.url + "/v1",
        "MNEMO_HOME": str(tmp_path / name),
        "MNEMO_SKILLS_DIR": str(SKILLS),
        "MNEMO_DATABASE_URL": pg_database,
    }
    services = await stack.enter_async_context(open_services(load_config(None, environ=env)))
    conversations = serving(services)
    assert conversations.order is not None  # storage.url: replicas
    conversations.order.serve_platform("telegram", chats.sink_for)
    stack.push_async_callback(conversations.close)
    return Replica(model, services, conversations, stack)


@pytest.fixture
async def two(pg_database: str, tmp_path: Path) -> AsyncIterator[tuple[Chats, Replica, Replica]]:
    chats = Chats()
    first = await _replica("a", pg_database, tmp_path, chats)
    second = await _replica("b", pg_database, tmp_path, chats)
    try:
        yield chats, first, second
    finally:
        for replica in (second, first):
            await replica.die()


def _sent(model: FakeOpenAI) -> list[list[dict[str, Any]]]:
    """The messages of each chat request the model got."""
    return [r.body["messages"] for r in model.requests if r.path == "/v1/chat/completions"]


async def test_alices_messages_on_alternating_replicas_are_answered_in_order_once_while_bob_waits(
    two: tuple[Chats, Replica, Replica],
) -> None:
    chats, a, b = two
    b.model.fail_next(Fault.stall())  # Bob's model on b is slow: held until released
    bob = await b.send(chats, private("bob here", "bob", "b1"))
    await wait_until(lambda: b.model.stalled == 1)
    a.model.fail_next(Fault.stall())  # Alice's first turn, on a, is held too
    first = await a.send(chats, private("alice one", "alice", "a1"))
    await wait_until(lambda: a.model.stalled == 1)
    second = await b.send(chats, private("alice two", "alice", "a2"))  # queued behind one
    third = await a.send(chats, private("alice three", "alice", "a3"))
    assert "alice" not in chats.replies
    a.model.release()  # a answers her queue in order: one, then two (b got it), three
    await asyncio.wait_for(asyncio.gather(first, second, third), scaled(10))
    assert chats.replies["alice"] == ["echo: alice one", "echo: alice two", "echo: alice three"]
    assert b.model.stalled == 1 and "bob" not in chats.replies  # Bob never blocked her
    b.model.release()
    await asyncio.wait_for(bob, scaled(10))
    assert chats.replies["bob"] == ["echo: bob here"]
    assert await a.services.sessions.queued_messages("telegram") == []
    assert len(_sent(a.model)) == 3 and len(_sent(b.model)) == 1  # each asked once


async def test_a_message_behind_a_thousand_queued_for_other_sessions_is_answered_at_once(
    two: tuple[Chats, Replica, Replica], pg_database: str
) -> None:
    """A session's queue is read by its key: before, the platform's whole queue was read,
    its oldest 1,000 only, and a message queued after them was never answered by its
    own replica (its reply came out empty)."""
    chats, a, _ = two
    zed = private("zed waits", "zed", "z1")  # their session is busy elsewhere: it waits
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO inbox (session_key, user_key, source, payload, received_at) "
            "SELECT %s, 'telegram-zed', 'telegram', %s, extract(epoch FROM now()) "
            "FROM generate_series(1, 1000)",
            (zed.session_key(), encode(zed)),
        )
    task = await a.send(chats, private("alice here", "alice", "a1"))
    await asyncio.wait_for(task, scaled(10))
    assert chats.replies["alice"] == ["echo: alice here"]
    assert len(await a.services.sessions.queued_messages("telegram")) == 1000  # theirs wait


async def test_a_session_written_by_the_other_replica_continues_from_the_store(
    two: tuple[Chats, Replica, Replica],
) -> None:
    chats, a, b = two
    for replica, text, mid in ((b, "one", "1"), (a, "two", "2"), (b, "three", "3")):
        await (await replica.send(chats, private(text, "alice", mid)))
    assert chats.replies["alice"] == ["echo: one", "echo: two", "echo: three"]
    on_a, on_b = _sent(a.model), _sent(b.model)
    said = [(m["role"], m["content"]) for m in on_b[-1][1:]]
    assert said == [
        ("user", "one"),
        ("assistant", "echo: one"),
        ("user", "two"),  # a's turn: b's cached history was stale, so b read the store
        ("assistant", "echo: two"),
        ("user", "three"),
    ]
    assert on_b[-1][0] == on_a[0][0] == on_b[0][0]  # one stored system prompt, byte for byte
    assert on_b[-1][:3] == on_a[0][:3]


async def test_a_replica_reads_the_sessions_mark_once_a_turn_and_still_sees_the_others_writes(
    two: tuple[Chats, Replica, Replica],
) -> None:
    """The mark noted when a turn lets go of the session is the one its own writes left
    (its history holds the session): read once a turn, when it takes the session. A
    write of the other replica still makes the next turn here read the store."""
    chats, a, b = two
    store = a.services.sessions
    reads: list[str] = []
    read_mark = store.session_mark

    async def counted(key: str) -> Any:
        reads.append(key)
        return await read_mark(key)

    store.session_mark = counted  # type: ignore[method-assign]
    for text, mid in (("one", "1"), ("two", "2"), ("three", "3")):
        await (await a.send(chats, private(text, "alice", mid)))
    assert len(reads) <= 3  # at most one a turn (before: two, less the first turn's first)
    await (await b.send(chats, private("four", "alice", "4")))
    await (await a.send(chats, private("five", "alice", "5")))
    said = [(m["role"], m["content"]) for m in _sent(a.model)[-1][1:]]
    assert ("user", "four") in said and ("assistant", "echo: four") in said  # read the store
    assert chats.replies["alice"] == [f"echo: {t}" for t in ("one", "two", "three", "four", "five")]


async def test_a_stop_handled_by_the_other_replica_stops_alices_turn_but_not_bobs(
    two: tuple[Chats, Replica, Replica],
) -> None:
    chats, a, b = two
    a.model.fail_next(Fault.stall())  # Alice's and Bob's turns both held at a's model
    a.model.fail_next(Fault.stall())
    alice = await a.send(chats, private("tell me a long story", "alice", "1"))
    bob = await a.send(chats, private("bob here", "bob", "b1"))
    await wait_until(lambda: a.model.stalled == 2)
    await (await b.send(chats, private("/stop", "alice", "2")))  # b got her /stop
    await asyncio.wait_for(alice, scaled(10))  # a's turn ended without the model's answer
    assert sorted(chats.replies["alice"]) == ["(stopped)", "Stopped."]
    assert "bob" not in chats.replies and not bob.done()  # Bob's turn still waits
    a.model.release()  # the held requests go on: Alice's was cancelled, Bob's is answered
    await asyncio.wait_for(bob, scaled(10))
    assert chats.replies["bob"] == ["echo: bob here"]
    assert sorted(chats.replies["alice"]) == ["(stopped)", "Stopped."]
    await (await b.send(chats, private("/stop", "alice", "3")))  # nothing runs anywhere now
    assert chats.replies["alice"][-1] == "Nothing is being written right now."


async def test_a_replica_cut_mid_turn_leaves_the_session_to_the_other(
    two: tuple[Chats, Replica, Replica],
) -> None:
    chats, a, b = two
    await (await a.send(chats, private("hello", "alice", "1")))
    a.model.fail_next(Fault.stall())
    cut = await a.send(chats, private("tell me more", "alice", "2"))
    await wait_until(lambda: a.model.stalled == 1)  # stored, the model asked
    behind = await a.send(chats, private("and then?", "alice", "3"))  # queued behind it
    for task in (cut, behind):  # a dies now
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await a.die()
    assert b.conversations.order is not None
    assert await b.conversations.order.sweep(stale=0) == 2
    assert chats.replies["alice"] == ["echo: hello", "echo: tell me more", "echo: and then?"]
    asked_a, asked_b = _sent(a.model)[-1], _sent(b.model)[0]
    assert asked_b == asked_a  # the same stored prompt and history, byte for byte
    assert await b.conversations.order.sweep(stale=0) == 0  # answered once


async def test_a_message_a_replica_stored_before_it_died_is_answered_before_the_next(
    two: tuple[Chats, Replica, Replica],
) -> None:
    """a dies mid-turn; Alice's next message reaches b at once (no sweep yet): b answers
    the stored one first, then hers, each once, each from the store's history."""
    chats, a, b = two
    await (await a.send(chats, private("hello", "alice", "1")))
    a.model.fail_next(Fault.stall())
    cut = await a.send(chats, private("tell me more", "alice", "2"))
    await wait_until(lambda: a.model.stalled == 1)  # stored, the model asked
    cut.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut
    await a.die()
    await (await b.send(chats, private("and then?", "alice", "3")))
    assert chats.replies["alice"] == ["echo: hello", "echo: tell me more", "echo: and then?"]
    said = [[(m["role"], m["content"]) for m in body[1:]] for body in _sent(b.model)]
    assert said == [
        [("user", "hello"), ("assistant", "echo: hello"), ("user", "tell me more")],
        [
            ("user", "hello"),
            ("assistant", "echo: hello"),
            ("user", "tell me more"),
            ("assistant", "echo: tell me more"),
            ("user", "and then?"),
        ],
    ]
    assert await b.services.sessions.unanswered("telegram", 0) == []
    assert b.conversations.order is not None
    assert await b.conversations.order.sweep(stale=0) == 0  # nothing left: answered once


async def test_a_replica_takes_no_data_directory_lock(pg_database: str, tmp_path: Path) -> None:
    home = tmp_path / "shared"
    async with FakeOpenAI(echo_when_idle=True) as model:
        env = {
            "OPENAI_BASE_URL": model.url + "/v1",
            "MNEMO_HOME": str(home),
            "MNEMO_SKILLS_DIR": str(SKILLS),
            "MNEMO_DATABASE_URL": pg_database,
        }
        out = io.StringIO()
        console = ConsoleAdapter(io.StringIO("hello\n"), out, user_id="ada")
        with instance_lock(home):  # another process's lock: a replica does not care
            await asyncio.wait_for(
                Service(load_config(None, environ=env), [console], signals=()).run(), scaled(20)
            )
    assert "echo: hello" in out.getvalue()

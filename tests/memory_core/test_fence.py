"""The erasure fence: work begun before a person's erasure writes nothing about them after it.

Each test has two people: Alice, who is erased while work of hers is in
flight, and Bob, whose writes from the same work must still land.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from filelock import FileLock

from memory_core import (
    ErasureFence,
    FileMemoryStore,
    MemoryManager,
    MemoryProvider,
    NewMessage,
    Operation,
    PersonData,
    PersonErasedError,
    SearchScope,
    SessionContext,
    SessionOrigin,
    SessionStore,
    SkillsStore,
    current_mark,
    working,
)
from memory_core.sessions import WritePolicy
from tests.timing import scaled

ALICE = "telegram-1001"
BOB = "telegram-2002"
SHORT = WritePolicy(busy_timeout=0.05, wait_timeout=10.0, flush_timeout=5.0)


def origin(user: str) -> SessionOrigin:
    return SessionOrigin(f"telegram:private:{user}", "telegram", user, user, "private")


def said(text: str, key: str) -> NewMessage:
    return NewMessage("user", text, 1000.0, key=key)


def skill(name: str) -> str:
    return f"---\nname: {name}\ndescription: a skill\n---\n# Steps\nDo it.\n"


@contextmanager
def write_lock(path: Path) -> Iterator[None]:
    """Another process's write transaction on state.db, held for the block."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("COMMIT")
        other.close()


class Home:
    """The three stores of one data directory, sharing one fence (as `mnemo run` does)."""

    def __init__(self, root: Path, sessions: SessionStore) -> None:
        self.root = root
        self.fence = sessions.fence
        self.memory = FileMemoryStore(root, fence=self.fence)
        self.skills = SkillsStore(
            root / "skills",
            root / "skills-manifest.json",
            private_dir=root / "skills-private",
            fence=self.fence,
        )
        self.sessions = sessions
        self.person = PersonData(self.memory, self.skills, sessions)

    def files_naming(self, text: str) -> list[Path]:
        return [p for p in self.root.rglob("*") if text in str(p.relative_to(self.root))]


@pytest.fixture
async def home(tmp_path: Path) -> AsyncIterator[Home]:
    (tmp_path / "skills").mkdir()
    async with SessionStore(tmp_path / "state.db", writes=SHORT) as store:
        yield Home(tmp_path, store)


def test_a_mark_orders_work_and_tasks_inherit_it() -> None:
    fence = ErasureFence()
    with working() as before:
        fence.erasing(ALICE)
        assert not fence.allows(ALICE)  # this work began before the erasure
        assert fence.allows(BOB)
        with working() as after:  # new work, begun after it
            assert after > before
            assert fence.allows(ALICE)
        with working(before):  # a job queued earlier runs as of when it was queued
            assert not fence.allows(ALICE)

        async def in_a_task() -> int:
            return current_mark()

        assert asyncio.run(in_a_task()) == before  # asyncio copies the context
    assert fence.allows(ALICE)  # outside any work: a write made now
    with pytest.raises(PersonErasedError, match="nothing was written"):
        fence.check(ALICE, before)


async def test_memory_and_skill_writes_begun_before_the_erasure_are_refused(home: Home) -> None:
    home.memory.apply("user", ALICE, [Operation("add", "likes quokkas")])
    with working():  # a turn of Alice's, still at the model when she erases everything
        await home.person.erase(ALICE)
        with pytest.raises(PersonErasedError):
            home.memory.apply("user", ALICE, [Operation("add", "likes zanzibar")])
        with pytest.raises(PersonErasedError):
            home.skills.create("cooking", skill("cooking"), user_key=ALICE)
        home.memory.apply("user", BOB, [Operation("add", "likes marmalade")])  # Bob's lands
        home.skills.create("baking", skill("baking"), user_key=BOB)
    assert home.files_naming(ALICE) == []  # no folder, lock file or backup left
    assert home.memory.read("user", BOB).entries == ("likes marmalade",)
    with working():  # Alice's next message, after the erasure, is ordinary work again
        home.memory.apply("user", ALICE, [Operation("add", "likes a fresh start")])
    assert home.memory.read("user", ALICE).entries == ("likes a fresh start",)


async def test_a_session_write_queued_before_the_erasure_does_not_land_after_it(
    home: Home,
) -> None:
    """state.db is locked by another process, so Alice's write waits in the writer's queue;
    the erasure is queued behind it. Alice's write would recreate her session after the
    delete if the check were made when it was queued; it is made when it runs."""
    path = home.sessions.path
    await home.sessions.append_message(origin=origin(ALICE), message=said("hello", "a0"))
    with working():
        with write_lock(path):
            waiting = [
                asyncio.ensure_future(
                    home.sessions.append_message(origin=origin(ALICE), message=said("vault", "a1"))
                ),
                asyncio.ensure_future(
                    home.sessions.queue_message("k", ALICE, "telegram", '{"text": "vault"}')
                ),
            ]
            await asyncio.sleep(0)  # both are in the writer's queue now
            home.fence.erasing(ALICE)
            erasure = asyncio.ensure_future(home.sessions.delete_user(ALICE))
            bob = asyncio.ensure_future(
                home.sessions.append_message(origin=origin(BOB), message=said("bob's", "b1"))
            )
            await asyncio.sleep(0)  # all four are queued, behind the lock, in this order
        outcomes = await asyncio.gather(*waiting, return_exceptions=True)
        deleted = await erasure
        await bob
    assert [type(o) for o in outcomes] == [PersonErasedError, PersonErasedError]
    assert (deleted.sessions, deleted.messages) == (1, 1)  # "hello", never "vault"
    assert (await home.sessions.user_totals(ALICE)).messages == 0
    assert await home.sessions.search("vault", SearchScope(user_key=ALICE)) == []
    assert (await home.sessions.user_totals(BOB)).messages == 1


class Recorder(MemoryProvider):
    """An external provider that keeps what it is told, by person."""

    name = "recorder"

    def __init__(self, release: asyncio.Event) -> None:
        self.release = release
        self.turns: list[tuple[str, str]] = []
        self.user_key = ""

    async def initialize(self, session: SessionContext) -> None:
        self.user_key = session.user_key

    async def sync_turn(self, user_text: str, assistant_text: str) -> None:
        await self.release.wait()  # the provider is slow
        self.turns.append((self.user_key, user_text))


async def test_a_provider_write_queued_by_a_turn_is_dropped_once_its_person_is_erased(
    home: Home,
) -> None:
    release = asyncio.Event()
    managers = {}
    for n, user in enumerate((ALICE, BOB)):
        recorder = Recorder(release)
        manager = MemoryManager(external=recorder, fence=home.fence)
        await manager.initialize(SessionContext(n + 1, user, "telegram", user, "private"))
        managers[user] = (manager, recorder)
    with working():  # two turns: each queues two writes behind a slow provider
        for user, (manager, _) in managers.items():
            manager.sync_all(f"{user} first", "ok")
            manager.sync_all(f"{user} second", "ok")
        await asyncio.sleep(0)
        home.fence.erasing(ALICE)  # while Alice's first write is at the provider
    release.set()
    for manager, _ in managers.values():
        await manager.shutdown()
    alice, bob = (recorder.turns for _, recorder in managers.values())
    assert alice == [(ALICE, f"{ALICE} first")]  # already handed over: the provider's erase
    assert bob == [(BOB, f"{BOB} first"), (BOB, f"{BOB} second")]


async def test_a_write_holding_the_lock_finishes_before_the_folder_goes(home: Home) -> None:
    """The erasure removes USER.md's folder under its lock: a write already inside waits
    out, and the folder does not come back."""
    home.memory.apply("user", ALICE, [Operation("add", "likes quokkas")])
    lock = home.memory.path("user", ALICE).with_name("USER.md.lock")
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with FileLock(lock):
            held.set()
            done.wait(scaled(5))

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(scaled(5))
    home.fence.erasing(ALICE)
    erasing = asyncio.get_running_loop().run_in_executor(None, home.memory.erase_user, ALICE)
    await asyncio.sleep(0.2)
    assert (home.root / "memories" / "users" / ALICE).exists()  # waits for the lock
    done.set()
    assert await erasing
    holder.join()
    assert home.files_naming(ALICE) == []

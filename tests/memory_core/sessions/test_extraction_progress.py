"""The extraction backlog in state.db: how far extraction got, what is due, what is quiet,
which reviews are due, and the link from a session to the one its key ended before."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core.sessions import BacklogEntry, ReviewDue, SearchOptions, SearchScope, SessionStore
from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import CounterUpdate, SessionOrigin
from memory_core.sessions.schema import migrate, schema_version
from tests.clock import Clock
from tests.memory_core.sessions.helpers import message, origin


@pytest.fixture
def clock() -> Clock:
    return Clock(5000.0)


@pytest.fixture
async def store(tmp_path: Path, clock: Clock) -> AsyncIterator[SessionStore]:
    async with SessionStore(tmp_path / "state.db", clock=clock) as opened:
        yield opened


async def say(store: SessionStore, where: SessionOrigin, *texts: str, ts: float = 1000.0) -> int:
    """Append messages to the open session of `where`; return its id."""
    result = await store.append_messages(
        origin=where, messages=[message(t, ts + i) for i, t in enumerate(texts)]
    )
    return result.session_id


async def last_id(store: SessionStore, session_id: int, user: str) -> int:
    return (await store.get_messages(session_id, SearchScope(user), lineage=False))[-1].id


# migration


def make_v4_database(path: Path) -> None:
    """A state.db as version 4 left it: one ended, one imported, one open session
    with messages, and one open session without any."""
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, target=4) == 4
    conn.executemany(
        "INSERT INTO sessions(id, source, user_key, owner_token, chat_id, chat_type, session_key, "
        "started_at, ended_at, end_reason, root_id, external_id) "
        "VALUES (?, 'telegram', 'telegram-1', 'x', 'c1', 'private', ?, ?, ?, ?, ?, ?)",
        [(1, "k-old", 100.0, 200.0, "new", 1, None),
         (2, None, 100.0, 150.0, "imported", 2, "trip"),
         (3, "k-open", 300.0, None, None, 3, None),
         (4, "k-empty", 400.0, None, None, 4, None)],
    )  # fmt: skip
    conn.executemany(
        "INSERT INTO messages(id, session_id, role, content, timestamp, dedupe_key) "
        "VALUES (?, ?, 'user', ?, ?, ?)",
        [(10, 1, "old talk", 101.0, "a"), (11, 1, "more old talk", 102.0, "b"),
         (20, 2, "imported talk", 101.0, "c"), (30, 3, "open talk", 301.0, "d")],
    )  # fmt: skip
    conn.close()


async def test_an_upgrade_marks_old_history_extracted_and_leaves_open_sessions_to_do(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "state.db"
    make_v4_database(path)
    async with SessionStore(path, clock=clock) as store:
        assert await store.extraction_progress(1) == 11
        assert await store.extraction_progress(2) == 20
        assert await store.extraction_progress(3) == 0
        assert await store.extraction_progress(4) == 0
        assert await store.extraction_progress(99) is None
        assert await store.pending_extractions() == []
        quiet = await store.quiet_sessions(before=clock.now)
        assert [(e.session_id, e.pending_messages, e.last_message_id) for e in quiet] == [
            (3, 1, 30)
        ]
    with SessionDB(path) as db:
        assert schema_version(db.conn) >= 5
        due = db.conn.execute("SELECT count(*) FROM sessions WHERE extraction_due != 0")
        assert due.fetchone()[0] == 0
        db.check()


# ending a session


async def test_ending_a_session_with_unextracted_messages_makes_it_due(
    store: SessionStore, clock: Clock
) -> None:
    where = origin("telegram-1")
    session = await say(store, where, "hello", "I moved to Lisbon")
    clock.now = 6000.0
    await store.end_session(session, "new")
    [entry] = await store.pending_extractions()
    assert entry == BacklogEntry(
        session_id=session,
        session_key=where.session_key,
        user_key="telegram-1",
        chat_id="telegram-1",
        chat_type="private",
        thread_id=None,
        source="telegram",
        ended_at=6000.0,
        end_reason="new",
        extracted_through=0,
        last_message_id=await last_id(store, session, "telegram-1"),
        last_message_at=1001.0,
        pending_messages=2,
    )


async def test_ending_a_fully_extracted_or_empty_session_is_not_due(
    store: SessionStore,
) -> None:
    done = await say(store, origin("telegram-1"), "hi", "bye")
    await store.mark_extracted(done, await last_id(store, done, "telegram-1"), finished=False)
    await store.end_session(done, "new")
    empty = await store.start_child_session(await say(store, origin("telegram-2"), "hey"))
    await store.end_session(empty, "new")
    due = {e.session_id for e in await store.pending_extractions()}
    assert due == {empty - 1}  # only the compressed parent, which had a message


async def test_ending_twice_keeps_the_first_end_and_a_finished_extraction(
    store: SessionStore, clock: Clock
) -> None:
    session = await say(store, origin(), "hi")
    await store.end_session(session, "new")
    await store.mark_extracted(session, await last_id(store, session, "telegram-1"), finished=True)
    clock.now = 9000.0
    await store.end_session(session, "idle")
    assert await store.pending_extractions() == []
    info = await store.get_session(session)
    assert info is not None and (info.ended_at, info.end_reason) == (5000.0, "new")


async def test_compression_makes_the_parent_due(store: SessionStore) -> None:
    parent = await say(store, origin(), "a long talk")
    child = await store.start_child_session(parent, messages=[message("summary", 2000.0)])
    assert [(e.session_id, e.end_reason) for e in await store.pending_extractions()] == [
        (parent, "compression")
    ]
    assert await store.extraction_progress(child) == 0


async def test_imported_and_internal_sessions_never_become_due(
    tmp_path: Path, store: SessionStore
) -> None:
    internal = await say(store, origin("telegram-1", source="extraction"), "notes")
    await store.end_session(internal, "done")
    with SessionDB(tmp_path / "state.db") as db:
        db.import_lines(
            ['{"session": "t", "user": "telegram-1", "platform": "telegram", "chat": "c", '
             '"chat_type": "private", "role": "user", "content": "x", "timestamp": 10}']
        )  # fmt: skip
    assert await store.pending_extractions() == []
    assert await store.quiet_sessions(before=1e12) == []


# progress


async def test_mark_extracted_only_moves_forward_and_finishing_clears_due(
    store: SessionStore,
) -> None:
    session = await say(store, origin(), "one", "two", "three")
    first, *_, last = (m.id for m in await store.get_messages(session, SearchScope("telegram-1")))
    await store.end_session(session, "new")
    await store.mark_extracted(session, first, finished=False)
    [due] = await store.pending_extractions()
    assert (due.extracted_through, due.pending_messages) == (first, 2)
    await store.mark_extracted(session, last, finished=False)
    await store.mark_extracted(session, first, finished=False)  # late: changes nothing
    assert await store.extraction_progress(session) == last
    [due] = await store.pending_extractions()  # still due, nothing pending: caller finishes it
    assert due.pending_messages == 0
    await store.mark_extracted(session, last, finished=True)
    await store.mark_extracted(session, last, finished=True)
    assert await store.pending_extractions() == []
    assert await store.extraction_progress(session) == last


async def test_mark_extracted_and_reset_counters_on_a_missing_session_do_nothing(
    store: SessionStore,
) -> None:
    await store.mark_extracted(12345, 7, finished=True)
    await store.reset_counters(12345)
    assert await store.extraction_progress(12345) is None


async def test_an_erased_session_leaves_the_backlog(store: SessionStore) -> None:
    session = await say(store, origin(), "secret")
    await store.end_session(session, "new")
    await store.delete_user("telegram-1")
    assert await store.pending_extractions() == []
    await store.mark_extracted(session, 1, finished=True)  # extraction finishing late


async def test_pending_extractions_come_oldest_ended_first_up_to_the_limit(
    store: SessionStore, clock: Clock
) -> None:
    ids = []
    for user, ended in (("telegram-1", 7000.0), ("telegram-2", 6000.0), ("telegram-3", 8000.0)):
        session = await say(store, origin(user), "hi")
        clock.now = ended
        await store.end_session(session, "new")
        ids.append(session)
    assert [e.session_id for e in await store.pending_extractions()] == [ids[1], ids[0], ids[2]]
    assert [e.session_id for e in await store.pending_extractions(limit=1)] == [ids[1]]


# quiet sessions


async def test_quiet_sessions_are_open_old_enough_and_not_yet_extracted(
    store: SessionStore,
) -> None:
    older = await say(store, origin("telegram-1"), "a", ts=1000.0)
    old = await say(store, origin("telegram-2"), "b", "c", ts=2000.0)
    recent = await say(store, origin("telegram-3"), "d", ts=4000.0)
    ended = await say(store, origin("telegram-4"), "e", ts=500.0)
    await store.end_session(ended, "new")
    done = await say(store, origin("telegram-5"), "f", ts=500.0)
    await store.mark_extracted(done, await last_id(store, done, "telegram-5"), finished=False)
    quiet = await store.quiet_sessions(before=3000.0)
    assert [e.session_id for e in quiet] == [older, old]
    assert all(e.ended_at is None and e.end_reason is None for e in quiet)
    assert (quiet[1].last_message_at, quiet[1].pending_messages) == (2001.0, 2)
    assert [e.session_id for e in await store.quiet_sessions(before=3000.0, limit=1)] == [older]
    assert recent not in {e.session_id for e in await store.quiet_sessions(before=4000.0)}


async def test_a_quiet_session_with_new_messages_after_extraction_is_quiet_again(
    store: SessionStore,
) -> None:
    where = origin()
    session = await say(store, where, "a", ts=1000.0)
    await store.mark_extracted(session, await last_id(store, session, "telegram-1"), finished=False)
    assert await store.quiet_sessions(before=3000.0) == []
    await say(store, where, "b", ts=2000.0)
    [entry] = await store.quiet_sessions(before=3000.0)
    assert (entry.session_id, entry.pending_messages) == (session, 1)


def test_the_backlog_queries_never_scan_all_messages(tmp_path: Path) -> None:
    from memory_core.sessions import backlog

    with SessionDB(tmp_path / "state.db") as db:
        db.append_message(origin=origin(), message=message("hi"))
        traced: list[str] = []
        db.conn.set_trace_callback(traced.append)
        backlog.quiet_sessions(db.conn, 1e12)
        backlog.pending_extractions(db.conn)
        backlog.reviews_due(db.conn, 1, 1)
        db.conn.set_trace_callback(None)
        assert len(traced) == 3
        for sql in traced:
            steps = [r[3] for r in db.conn.execute("EXPLAIN QUERY PLAN " + sql)]
            reads = [step for step in steps if step.startswith(("SCAN", "SEARCH"))]
            # Sessions are read only through the partial indexes of the open or due
            # ones, messages only one session at a time.
            assert reads, steps
            for step in reads:
                assert (
                    "INDEX sessions_open" in step
                    or "INDEX sessions_extraction_due" in step
                    or step.startswith("SEARCH m USING COVERING INDEX messages_session")
                ), steps


# reviews


async def test_reviews_due_and_reset_counters(store: SessionStore) -> None:
    talk = await store.append_messages(
        origin=origin("telegram-1"), messages=[message("a")], counters=CounterUpdate(turns=5)
    )
    tools = await store.append_messages(
        origin=origin("telegram-2"), messages=[message("b")], counters=CounterUpdate(steps=9)
    )
    quiet = await store.append_messages(
        origin=origin("telegram-3"), messages=[message("c")], counters=CounterUpdate(turns=1)
    )
    assert await store.reviews_due(turns=5, steps=9) == [
        ReviewDue(talk.session_id, origin("telegram-1").session_key, "telegram-1", 5, 0),
        ReviewDue(tools.session_id, origin("telegram-2").session_key, "telegram-2", 0, 9),
    ]
    assert [r.session_id for r in await store.reviews_due(turns=0, steps=9)] == [tools.session_id]
    assert await store.reviews_due(turns=0, steps=0) == []
    assert [r.session_id for r in await store.reviews_due(turns=1, steps=0, limit=2)] == [
        talk.session_id,
        quiet.session_id,
    ]
    await store.reset_counters(talk.session_id)
    counters = await store.get_counters(talk.session_id)
    assert counters is not None and (counters.turns_since_memory, counters.steps_since_skill) == (
        0,
        0,
    )
    await store.end_session(tools.session_id, "new")
    assert await store.reviews_due(turns=5, steps=9) == []


# the next session of a key


async def test_the_next_session_of_a_key_links_back_in_a_lineage_of_its_own(
    store: SessionStore,
) -> None:
    where = origin()
    old = await say(store, where, "we planned the ferry trip")
    await store.end_session(old, "new")
    new = await say(store, where, "hello again", ts=3000.0)
    info = await store.get_session(new)
    assert info is not None and new != old
    assert (info.parent_session_id, info.root_id) == (old, new)
    hits = await store.search(
        "ferry", SearchScope("telegram-1"), SearchOptions(exclude_lineage_of=new)
    )
    assert [h.session_id for h in hits] == [old]
    other = await say(store, origin("telegram-2"), "first time")
    other_info = await store.get_session(other)
    assert other_info is not None and other_info.parent_session_id is None
    newest = await say(store, where, "more", ts=4000.0)
    assert newest == new  # still open: the same session, its link unchanged

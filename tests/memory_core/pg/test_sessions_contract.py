"""The session store contract: SessionStore (SQLite) and PgSessionStore, same calls, same results.

Every test runs against both stores (`store` is parametrised over "sqlite" and
"pg"); `test_export_lines_are_identical_on_both` runs one script on both at
once and compares the exports whole.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from memory_core.errors import (
    InvalidMessageError,
    PersonErasedError,
    SessionConflictError,
    SessionNotFoundError,
    SessionStoreError,
)
from memory_core.fence import working
from memory_core.pg.database import PgDatabase
from memory_core.pg.sessions import PgSessionStore
from memory_core.scopes import SearchScope, recall_scope
from memory_core.sessions.backend import SessionBackend
from memory_core.sessions.models import CounterUpdate, SearchOptions, SessionOrigin
from memory_core.sessions.store import SessionStore
from tests.memory_core.pg.session_stores import NOW, Clock
from tests.memory_core.sessions.helpers import message, origin

ALICE, BOB = "telegram-1001", "telegram-2002"
GROUP = "-500"


def alice(chat: str | None = None, **kw: object) -> SessionOrigin:
    return origin(ALICE, chat, **kw)  # type: ignore[arg-type]


def scope_of(user: str = ALICE) -> SearchScope:
    return SearchScope(user)


# appends and dedupe


async def test_the_first_message_creates_the_session(store: SessionBackend) -> None:
    result = await store.append_message(origin=alice(), message=message("hello", 1000))
    assert result.session_created and result.inserted == 1 and len(result.message_ids) == 1
    info = await store.get_session(result.session_id)
    assert info is not None
    assert (info.user_key, info.chat_type, info.root_id, info.started_at) == (
        ALICE, "private", result.session_id, 1000.0,
    )  # fmt: skip
    again = await store.append_message(origin=alice(), message=message("next", 1001))
    assert (again.session_id, again.session_created) == (result.session_id, False)


async def test_the_same_turn_twice_adds_nothing(store: SessionBackend) -> None:
    turn = [message("a", 1, key="t1:0"), message("b", 2, role="assistant", key="t1:1")]
    first = await store.append_messages(origin=alice(), messages=turn)
    second = await store.append_messages(origin=alice(), messages=turn)
    assert first.inserted == 2 and second.inserted == 0
    assert second.message_ids == first.message_ids
    assert (await store.user_totals(ALICE)).messages == 2


async def test_platform_ids_dedupe_within_a_session(store: SessionBackend) -> None:
    one = message("hi", 1, platform_message_id="77")
    result = await store.append_messages(origin=alice(), messages=[one, replace(one, content="x")])
    assert result.inserted == 1 and result.message_ids[0] == result.message_ids[1]
    texts = [m.content for m in await store.get_messages(result.session_id, scope_of())]
    assert texts == ["hi"]


async def test_an_empty_batch_is_refused(store: SessionBackend) -> None:
    with pytest.raises(InvalidMessageError):
        await store.append_messages(origin=alice(), messages=[])


async def test_a_session_key_cannot_switch_owner(store: SessionBackend) -> None:
    first = alice()
    await store.append_message(origin=first, message=message("a"))
    thief = replace(first, user_key=BOB)
    with pytest.raises(SessionConflictError):
        await store.append_message(origin=thief, message=message("b"))


async def test_messages_keep_every_field_and_lone_surrogates_become_fffd(
    store: SessionBackend,
) -> None:
    m = message("bad \ud800 text", 3, role="tool", tool_name="t", tool_call_id="c1",
                tool_calls='[{"id": "c1"}]', speaker_name="Al", own_words=False)  # fmt: skip
    result = await store.append_message(origin=alice(), message=m)
    (stored,) = await store.get_messages(result.session_id, scope_of())
    assert stored.content == "bad \ufffd text"
    assert (stored.role, stored.tool_name, stored.tool_call_id, stored.tool_calls) == (
        "tool", "t", "c1", '[{"id": "c1"}]',
    )  # fmt: skip
    assert (stored.speaker_name, stored.own_words, stored.timestamp) == ("Al", False, 3.0)


async def test_counters_move_only_when_a_message_is_new(store: SessionBackend) -> None:
    turn = [message("a", 1, key="c:0")]
    bump = CounterUpdate(turns=1, steps=3)
    result = await store.append_messages(origin=alice(), messages=turn, counters=bump)
    await store.append_messages(origin=alice(), messages=turn, counters=bump)
    counters = await store.get_counters(result.session_id)
    assert counters is not None and (counters.turns_since_memory, counters.steps_since_skill) == (
        1, 3,
    )  # fmt: skip
    wrote = CounterUpdate(turns=0, steps=2, memory_written=True, skill_written=True)
    await store.append_messages(origin=alice(), messages=[message("b", 2)], counters=wrote)
    counters = await store.get_counters(result.session_id)
    assert counters is not None
    assert (counters.turns_since_memory, counters.steps_since_skill) == (0, 2)
    await store.reset_counters(result.session_id)
    counters = await store.get_counters(result.session_id)
    assert counters is not None and counters.steps_since_skill == 0
    await store.reset_counters(999_999)  # no such session: no error
    assert await store.get_counters(999_999) is None


# prompts


async def test_a_system_prompt_is_stored_once(store: SessionBackend) -> None:
    sid = (await store.append_message(origin=alice(), message=message("a"))).session_id
    assert await store.set_system_prompt(sid, "first") == "first"
    assert await store.set_system_prompt(sid, "second") == "first"
    assert await store.get_system_prompt(sid, scope_of()) == "first"
    assert await store.get_system_prompt(sid, scope_of(BOB)) is None
    with pytest.raises(SessionNotFoundError):
        await store.set_system_prompt(999_999, "x")


async def test_clearing_prompts_touches_only_open_sessions(store: SessionBackend) -> None:
    sid = (await store.append_message(origin=alice(), message=message("a"))).session_id
    await store.set_system_prompt(sid, "p")
    other = (await store.append_message(origin=alice(GROUP, chat_type="group"),
                                        message=message("b"))).session_id  # fmt: skip
    await store.set_system_prompt(other, "q")
    await store.end_session(other, "done")  # ending drops the prompt already
    assert await store.clear_system_prompts(ALICE) == 1
    assert await store.get_system_prompt(sid, scope_of()) is None
    assert await store.clear_system_prompts(ALICE) == 0


# ends, children, lineage


async def test_ending_keeps_the_first_end_and_the_next_message_starts_anew(
    store: SessionBackend, clock: Clock
) -> None:
    sid = (await store.append_message(origin=alice(), message=message("a"))).session_id
    await store.end_session(sid, "first")
    clock.now += 10
    await store.end_session(sid, "second")
    info = await store.get_session(sid)
    assert info is not None and (info.ended_at, info.end_reason) == (NOW, "first")
    assert await store.current_session(alice().session_key) is None
    nxt = await store.append_message(origin=alice(), message=message("b", 2000))
    assert nxt.session_created and nxt.session_id != sid
    new = await store.get_session(nxt.session_id)
    assert new is not None and (new.parent_session_id, new.root_id) == (sid, nxt.session_id)
    with pytest.raises(SessionNotFoundError):
        await store.end_session(999_999, "x")


async def test_a_child_continues_the_lineage_with_its_first_messages(
    store: SessionBackend,
) -> None:
    parent = await store.append_messages(
        origin=alice(), messages=[message("a", 1)], counters=CounterUpdate(turns=4)
    )
    await store.set_system_prompt(parent.session_id, "p")
    child = await store.start_child_session(
        parent.session_id, model="m2", messages=[message("summary", 2, role="system")]
    )
    info = await store.get_session(child)
    assert info is not None
    assert (info.parent_session_id, info.root_id, info.model) == (
        parent.session_id, parent.session_id, "m2",
    )  # fmt: skip
    ended = await store.get_session(parent.session_id)
    assert ended is not None and ended.end_reason == "compression"
    current = await store.current_session(alice().session_key)
    assert current is not None and current.id == child
    assert await store.get_system_prompt(child, scope_of()) is None
    counters = await store.get_counters(child)
    assert counters is not None and counters.turns_since_memory == 4
    whole = await store.get_messages(child, scope_of())
    assert [m.content for m in whole] == ["a", "summary"]
    alone = await store.get_messages(child, scope_of(), lineage=False)
    assert [m.content for m in alone] == ["summary"]
    listed = await store.list_sessions(scope_of())
    assert [s.id for s in listed] == [parent.session_id]  # roots only
    with pytest.raises(SessionNotFoundError):
        await store.start_child_session(999_999)


async def test_a_child_cannot_take_a_key_another_session_holds(store: SessionBackend) -> None:
    first = (await store.append_message(origin=alice(), message=message("a"))).session_id
    await store.end_session(first, "done")
    await store.append_message(origin=alice(), message=message("b"))  # a new open session
    with pytest.raises(SessionConflictError):
        await store.start_child_session(first)


# chats


async def test_migrate_chat_moves_sessions_and_their_keys(store: SessionBackend) -> None:
    old = alice(GROUP, chat_type="group", key=f"telegram:group:{GROUP}:{ALICE}")
    sid = (await store.append_message(origin=old, message=message("a"))).session_id
    assert await store.migrate_chat("telegram", GROUP, "-100500") == 1
    info = await store.get_session(sid)
    assert info is not None and info.chat_id == "-100500"
    assert info.session_key == f"telegram:group:-100500:{ALICE}"
    assert await store.migrate_chat("telegram", GROUP, "-100500") == 0


async def test_migrate_chat_ends_the_old_session_when_the_new_chat_has_one_open(
    store: SessionBackend,
) -> None:
    old = alice(GROUP, chat_type="group", key=f"telegram:group:{GROUP}:{ALICE}")
    new = alice("-9", chat_type="group", key=f"telegram:group:-9:{ALICE}")
    sid = (await store.append_message(origin=old, message=message("a"))).session_id
    kept = (await store.append_message(origin=new, message=message("b"))).session_id
    assert await store.migrate_chat("telegram", GROUP, "-9") == 1
    info = await store.get_session(sid)
    assert info is not None and info.end_reason == "migrated"
    current = await store.current_session(new.session_key)
    assert current is not None and current.id == kept
    due = await store.pending_extractions()
    assert [e.session_id for e in due] == [sid]


# notices and unanswered


async def test_unanswered_lists_open_sessions_ending_in_a_persons_message(
    store: SessionBackend,
) -> None:
    waiting = await store.append_message(origin=alice(), message=message("hello?", 100))
    answered = origin(BOB)
    await store.append_messages(
        origin=answered, messages=[message("q", 101), message("a", 102, role="assistant")]
    )
    found = await store.unanswered("telegram", since=50)
    assert [(s.id, m.content) for s, m in found] == [(waiting.session_id, "hello?")]
    assert await store.unanswered("telegram", since=100.5) == []
    assert await store.unanswered("discord", since=0) == []


async def test_a_notice_answers_a_message(store: SessionBackend) -> None:
    result = await store.append_message(origin=alice(), message=message("hello?", 100))
    (mid,) = result.message_ids
    assert await store.record_notice(mid, "the model failed")
    assert await store.unanswered("telegram", since=0) == []
    reply = await store.append_message(origin=alice(), message=message("x", 101, role="assistant"))
    assert not await store.record_notice(reply.message_ids[0], "no")  # only a person's message
    assert not await store.record_notice(999_999, "no")


async def test_a_message_left_unanswered_stays_found_after_a_later_one_is_answered(
    store: SessionBackend,
) -> None:
    """A turn killed after storing m1; the person's m2 answered elsewhere: m1 is still owed."""
    m1 = await store.append_message(origin=alice(), message=message("m1", 100, key="t1:0"))
    await store.append_messages(origin=alice(), messages=[message("m2", 101, key="t2:0")])
    await store.append_messages(
        origin=alice(), messages=[message("re m2", 102, role="assistant", key="t2:1")]
    )
    found = await store.unanswered("telegram", since=50)
    assert [(s.id, m.id, m.content) for s, m in found] == [(m1.session_id, m1.message_ids[0], "m1")]


async def test_unanswered_of_one_session_reads_only_that_sessions(store: SessionBackend) -> None:
    waiting = await store.append_message(origin=alice(), message=message("hello?", 100))
    await store.append_message(origin=origin(BOB), message=message("hi?", 101))
    bobs = await store.unanswered("telegram", 50, session_key=origin(BOB).session_key)
    assert [m.content for _, m in bobs] == ["hi?"]
    alices = await store.unanswered("telegram", 50, session_key=alice().session_key)
    assert [(s.id, m.content) for s, m in alices] == [(waiting.session_id, "hello?")]
    assert await store.unanswered("telegram", 50, session_key="telegram:private:nobody") == []


async def test_a_waiting_message_stored_again_waits_only_while_it_is_the_last(
    store: SessionBackend,
) -> None:
    """Its turn runs again: still the session's last, it waits for that turn's reply;
    overtaken by later messages, that turn cannot answer it (`Turns._history`)."""
    m1 = message("m1", 100, platform_message_id="1")
    first = await store.append_message(origin=alice(), message=m1)
    again = await store.append_message(origin=alice(), message=m1)
    assert (again.inserted, again.message_ids) == (0, first.message_ids)
    assert [m.content for _, m in await store.unanswered("telegram", 50)] == ["m1"]
    await store.append_message(origin=alice(), message=message("m2", 101))
    await store.append_message(origin=alice(), message=message("re m2", 102, role="assistant"))
    assert [m.content for _, m in await store.unanswered("telegram", 50)] == ["m1"]
    late = await store.append_message(origin=alice(), message=m1)
    assert (late.inserted, late.message_ids) == (0, first.message_ids)
    assert await store.unanswered("telegram", 50) == []


async def test_every_unanswered_message_is_found_oldest_first(store: SessionBackend) -> None:
    await store.append_message(origin=alice(), message=message("m1", 100))
    await store.append_message(origin=alice(), message=message("m2", 101))
    await store.append_message(origin=origin(BOB), message=message("b1", 100.5))
    found = await store.unanswered("telegram", since=50)
    assert [m.content for _, m in found] == ["m1", "b1", "m2"]
    assert [m.content for _, m in await store.unanswered("telegram", since=100.2)] == ["b1", "m2"]
    assert [m.content for _, m in await store.unanswered("telegram", 50, limit=1)] == ["m1"]


async def test_a_reply_a_stop_or_a_notice_answers_only_its_message(
    store: SessionBackend,
) -> None:
    """A reply answers the session's newest message waiting; one written again answers
    nothing more; a batch with its own person's message answers that one."""
    await store.append_message(origin=alice(), message=message("m1", 100))
    await store.append_message(origin=alice(), message=message("m2", 101))
    reply = message("re m2", 102, role="assistant")
    replied = await store.append_messages(origin=alice(), messages=[reply])
    await store.append_messages(origin=alice(), messages=[reply])  # written twice: once
    await store.append_messages(
        origin=alice(), messages=[message("q", 103), message("a", 104, role="assistant")]
    )
    assert [m.content for _, m in await store.unanswered("telegram", 50)] == ["m1"]
    m3 = await store.append_message(origin=alice(), message=message("m3", 105))
    assert await store.record_notice(m3.message_ids[0], "the model failed")
    assert not await store.record_notice(replied.message_ids[0], "a reply takes none")
    await store.append_messages(
        origin=alice(), messages=[message("(stopped)", 106, role="assistant")]
    )  # a stop's note answers the newest waiting: m1
    assert await store.unanswered("telegram", 50) == []


async def test_an_ended_session_owes_nothing_and_a_compressed_one_carries_the_message(
    store: SessionBackend,
) -> None:
    first = await store.append_message(origin=alice(), message=message("m1", 100))
    await store.end_session(first.session_id, "new")
    assert await store.unanswered("telegram", 50) == []
    await store.append_messages(origin=alice(), messages=[message("m2", 101)])  # new session
    parent = await store.append_message(
        origin=alice(), message=message("m3", 102, platform_message_id="p3")
    )
    child = await store.start_child_session(
        parent.session_id,
        messages=[
            message("summary", 100, own_words=False),
            message("m2", 101, key="copy-m2"),  # no platform id: not told apart, not carried
            message("m3", 102, platform_message_id="p3"),
        ],
    )
    found = await store.unanswered("telegram", 50)
    assert [(s.id, m.content) for s, m in found] == [(child, "m3")]
    await store.append_messages(origin=alice(), messages=[message("re m3", 103, role="assistant")])
    assert await store.unanswered("telegram", 50) == []


# inbox


async def test_the_inbox_keeps_waiting_messages_in_order(
    store: SessionBackend, clock: Clock
) -> None:
    first = await store.queue_message("k1", ALICE, "telegram", '{"text": "one"}')
    clock.now += 1
    second = await store.queue_message("k1", ALICE, "telegram", '{"text": "two"}')
    await store.queue_message("k2", BOB, "discord", "{}")
    waiting = await store.queued_messages("telegram")
    assert [(q.id, q.payload, q.received_at) for q in waiting] == [
        (first, '{"text": "one"}', NOW), (second, '{"text": "two"}', NOW + 1),
    ]  # fmt: skip
    assert (waiting[0].session_key, waiting[0].user_key, waiting[0].source) == (
        "k1", ALICE, "telegram",
    )  # fmt: skip
    await store.drop_queued(first)
    await store.drop_queued(first)  # a missing one is fine
    assert [q.id for q in await store.queued_messages("telegram")] == [second]


async def test_a_sessions_queue_is_read_by_its_key(store: SessionBackend, clock: Clock) -> None:
    first = await store.queue_message("k1", ALICE, "telegram", '{"text": "one"}')
    other = await store.queue_message("k2", ALICE, "telegram", '{"text": "else"}')
    clock.now += 1
    second = await store.queue_message("k1", ALICE, "telegram", '{"text": "two"}')
    await store.queue_message("k3", BOB, "discord", "{}")
    waiting = await store.queued_for("k1")
    assert [(q.id, q.payload, q.received_at) for q in waiting] == [
        (first, '{"text": "one"}', NOW), (second, '{"text": "two"}', NOW + 1),
    ]  # fmt: skip
    assert {(q.session_key, q.user_key, q.source) for q in waiting} == {("k1", ALICE, "telegram")}
    assert [q.id for q in await store.queued_for("k2")] == [other]
    assert await store.queued_for("nobody") == []
    await store.drop_queued(first)
    assert [q.id for q in await store.queued_for("k1")] == [second]
    await store.delete_user(ALICE)
    assert await store.queued_for("k1") == [] and await store.queued_for("k2") == []


# the backlog


async def test_ending_makes_extraction_due_and_marks_only_move_forward(
    store: SessionBackend,
) -> None:
    result = await store.append_messages(
        origin=alice(), messages=[message("a", 1), message("b", 2, role="assistant")]
    )
    sid, last = result.session_id, result.message_ids[-1]
    assert await store.extraction_progress(sid) == 0
    assert await store.pending_extractions() == []
    await store.end_session(sid, "idle")
    (entry,) = await store.pending_extractions()
    assert (entry.session_id, entry.pending_messages, entry.last_message_id) == (sid, 2, last)
    assert (entry.ended_at, entry.end_reason, entry.last_message_at) == (NOW, "idle", 2.0)
    await store.mark_extracted(sid, last, finished=False)
    await store.mark_extracted(sid, result.message_ids[0], finished=False)  # never back
    assert await store.extraction_progress(sid) == last
    (entry,) = await store.pending_extractions()
    assert entry.pending_messages == 0
    await store.mark_extracted(sid, last, finished=True)
    assert await store.pending_extractions() == []
    assert await store.extraction_progress(999_999) is None
    await store.mark_extracted(999_999, 5, finished=True)  # erased meanwhile: no-op


async def test_an_extracted_session_ends_without_becoming_due(store: SessionBackend) -> None:
    result = await store.append_message(origin=alice(), message=message("a", 1))
    await store.mark_extracted(result.session_id, result.message_ids[0], finished=False)
    await store.end_session(result.session_id, "idle")
    assert await store.pending_extractions() == []


async def test_internal_sessions_are_never_in_the_backlog(store: SessionBackend) -> None:
    review = origin(ALICE, source="review", key="review:1")
    result = await store.append_messages(
        origin=review, messages=[message("x", 1)], counters=CounterUpdate(turns=9, steps=9)
    )
    assert await store.quiet_sessions(before=100) == []
    assert await store.reviews_due(turns=1, steps=1) == []
    await store.end_session(result.session_id, "done")
    assert await store.pending_extractions() == []


async def test_quiet_sessions_are_the_least_recently_active_first(store: SessionBackend) -> None:
    late = await store.append_message(origin=origin(BOB), message=message("b", 50))
    early = await store.append_message(origin=alice(), message=message("a", 10))
    quiet = await store.quiet_sessions(before=100)
    assert [e.session_id for e in quiet] == [early.session_id, late.session_id]
    assert [e.session_id for e in await store.quiet_sessions(before=20)] == [early.session_id]
    assert [e.session_id for e in await store.quiet_sessions(before=100, limit=1)] == [
        early.session_id
    ]
    await store.mark_extracted(early.session_id, early.message_ids[0], finished=False)
    assert [e.session_id for e in await store.quiet_sessions(before=100)] == [late.session_id]
    assert quiet[0].ended_at is None and quiet[0].pending_messages == 1


async def test_reviews_due_by_turns_or_steps(store: SessionBackend) -> None:
    a = await store.append_messages(
        origin=alice(), messages=[message("a")], counters=CounterUpdate(turns=5)
    )
    b = await store.append_messages(
        origin=origin(BOB), messages=[message("b")], counters=CounterUpdate(steps=7)
    )
    due = await store.reviews_due(turns=5, steps=0)
    assert [(d.session_id, d.user_key, d.turns_since_memory) for d in due] == [
        (a.session_id, ALICE, 5)
    ]
    both = await store.reviews_due(turns=5, steps=7)
    assert [d.session_id for d in both] == [a.session_id, b.session_id]
    assert await store.reviews_due(turns=0, steps=0) == []
    assert [d.session_id for d in await store.reviews_due(turns=1, steps=1, limit=1)] == [
        a.session_id
    ]


# reads and scopes


async def test_a_second_person_never_sees_the_first_persons_sessions(
    store: SessionBackend,
) -> None:
    sid = (await store.append_message(origin=alice(), message=message("secret"))).session_id
    await store.set_system_prompt(sid, "about alice")
    assert await store.get_messages(sid, scope_of(BOB)) == []
    assert await store.get_system_prompt(sid, scope_of(BOB)) is None
    assert await store.list_sessions(scope_of(BOB)) == []
    window = SearchOptions(since=0)
    assert await store.active_sessions(scope_of(BOB), window) == ([], 0)
    assert [s.id for s in await store.list_sessions(scope_of())] == [sid]


async def test_scopes_keep_chats_and_threads_apart(store: SessionBackend) -> None:
    direct = (await store.append_message(origin=alice(), message=message("d", 1))).session_id
    group = alice(GROUP, chat_type="group")
    in_group = (await store.append_message(origin=group, message=message("g", 2))).session_id
    thread = replace(group, session_key=group.session_key + ":t7", thread_id="t7")
    in_thread = (await store.append_message(origin=thread, message=message("t", 3))).session_id

    async def ids(scope: SearchScope) -> list[int]:
        return sorted(s.id for s in await store.list_sessions(scope))

    assert await ids(recall_scope(ALICE, ALICE, "private")) == sorted([direct, in_group])
    assert await ids(recall_scope(ALICE, GROUP, "group")) == [in_group]
    assert await ids(recall_scope(ALICE, GROUP, "group", "t7")) == [in_thread]
    assert await ids(SearchScope(ALICE)) == sorted([direct, in_group, in_thread])
    assert await store.get_messages(in_thread, recall_scope(ALICE, GROUP, "group")) == []


async def test_list_sessions_is_newest_first_and_limited(store: SessionBackend) -> None:
    ids = []
    for n in range(3):
        sid = await store.append_message(origin=alice(), message=message(f"m{n}", 10 + n))
        await store.end_session(sid.session_id, "done")
        ids.append(sid.session_id)
    assert [s.id for s in await store.list_sessions(scope_of())] == ids[::-1]
    assert [s.id for s in await store.list_sessions(scope_of(), limit=2)] == ids[:0:-1]


async def test_messages_come_in_time_order(store: SessionBackend) -> None:
    sid = (await store.append_messages(
        origin=alice(), messages=[message("late", 20), message("early", 10)]
    )).session_id  # fmt: skip
    assert [m.content for m in await store.get_messages(sid, scope_of())] == ["early", "late"]
    assert await store.get_messages(999_999, scope_of()) == []
    assert await store.get_session(999_999) is None


async def test_active_sessions_in_a_window(store: SessionBackend) -> None:
    first = await store.append_messages(
        origin=alice(), messages=[message("a", 10), message("b", 20, role="assistant")]
    )
    await store.start_child_session(first.session_id, messages=[message("c", 30)])
    other = await store.append_message(origin=alice(GROUP, chat_type="group"),
                                       message=message("g", 40))  # fmt: skip
    found, total = await store.active_sessions(scope_of(), SearchOptions(since=15))
    assert total == 2
    assert [(a.session_id, a.first_at, a.last_at, a.messages) for a in found] == [
        (other.session_id, 40.0, 40.0, 1), (first.session_id, 20.0, 30.0, 2),
    ]  # fmt: skip
    limited, total = await store.active_sessions(scope_of(), SearchOptions(since=0, limit=1))
    assert (len(limited), total) == (1, 2)
    left_out = SearchOptions(since=0, exclude_lineage_of=first.session_id)
    found, _ = await store.active_sessions(scope_of(), left_out)
    assert [a.session_id for a in found] == [other.session_id]


async def test_user_totals_and_keys(store: SessionBackend) -> None:
    a = alice()
    await store.append_messages(origin=a, messages=[message("a"), message("b")])
    await store.append_message(origin=alice(GROUP, chat_type="group"), message=message("c"))
    await store.append_message(origin=origin(BOB), message=message("d"))
    totals = await store.user_totals(ALICE)
    assert (totals.user_key, totals.sessions, totals.messages) == (ALICE, 2, 3)
    assert (await store.user_totals("telegram-404")).sessions == 0
    every = await store.all_user_totals()
    assert [(t.user_key, t.sessions, t.messages) for t in every] == [(ALICE, 2, 3), (BOB, 1, 1)]
    keys = await store.user_session_keys(ALICE)
    assert keys == sorted([a.session_key, alice(GROUP, chat_type="group").session_key])


async def test_search_finds_a_persons_conversations_and_no_one_elses(
    store: SessionBackend,
) -> None:
    mine = await store.append_messages(
        origin=alice(), messages=[message("the deploy failed again", 10)]
    )
    await store.append_message(origin=origin(BOB), message=message("my deploy failed", 11))
    hits = await store.search("deploy failed", scope_of())
    assert [h.session_id for h in hits] == [mine.session_id]
    assert hits[0].snippets and "deploy" in hits[0].snippets[0].text
    assert await store.search("nothing like it", scope_of()) == []


# erasure and the fence


async def test_delete_user_removes_only_that_person(store: SessionBackend) -> None:
    first = await store.append_messages(origin=alice(), messages=[message("a"), message("b")])
    await store.start_child_session(first.session_id, messages=[message("c")])
    await store.queue_message("k", ALICE, "telegram", "{}")
    await store.append_message(origin=origin(BOB), message=message("bob's"))
    await store.queue_message("k2", BOB, "telegram", "{}")
    result = await store.delete_user(ALICE)
    assert (result.sessions, result.messages) == (2, 3)
    assert (await store.user_totals(ALICE)).sessions == 0
    assert await store.export_lines(ALICE) == []
    assert [q.user_key for q in await store.queued_messages("telegram")] == [BOB]
    assert (await store.user_totals(BOB)).messages == 1
    assert await store.delete_user(ALICE) == type(result)(0, 0)


async def test_a_write_begun_before_an_erasure_is_refused(store: SessionBackend) -> None:
    with working():
        store.fence.erasing(ALICE)
        with pytest.raises(PersonErasedError):
            await store.append_message(origin=alice(), message=message("late"))
        with pytest.raises(PersonErasedError):
            await store.queue_message("k", ALICE, "telegram", "{}")
        await store.append_message(origin=origin(BOB), message=message("fine"))
    assert (await store.user_totals(ALICE)).messages == 0
    await store.append_message(origin=alice(), message=message("new work"))  # begun after
    assert (await store.user_totals(ALICE)).messages == 1


async def test_a_closed_store_refuses_calls(store: SessionBackend) -> None:
    await store.close()
    with pytest.raises(SessionStoreError):
        await store.append_message(origin=alice(), message=message("a"))
    with pytest.raises(SessionStoreError):
        await store.get_session(1)
    assert await store.flush(1.0)
    await store.open()  # the fixture closes it again


# export


async def _script(store: SessionBackend, clock: Clock) -> None:
    first = await store.append_messages(
        origin=alice(),
        messages=[
            message("héllo 🚀", 1000.25, speaker_name="Al"),
            message("answer", 1001.5, role="assistant"),
            message("{}", 1002, role="tool", tool_name="t", tool_call_id="c", tool_calls="[]"),
        ],
    )
    clock.now = 1003.0
    await store.start_child_session(first.session_id, messages=[message("sum", 1003)])
    await store.append_message(origin=alice(GROUP, chat_type="group"), message=message("g", 999))
    await store.append_message(origin=origin(BOB), message=message("bob", 1))


async def test_export_lines_are_identical_on_both(
    tmp_path: Path, clock: Clock, pg_db: PgDatabase
) -> None:
    sqlite_store = SessionStore(tmp_path / "state.db", clock=clock)
    pg_store = PgSessionStore(pg_db, clock=clock)
    exports = []
    for backend in (sqlite_store, pg_store):
        async with backend:
            clock.now = NOW
            await _script(backend, clock)
            exports.append(await backend.export_lines(ALICE))
    assert exports[0] == exports[1]
    assert len(exports[0]) == 5 and '"name": "Al"' in exports[0][0]
    assert "mnemo:1:1000.25" in exports[0][0]


async def test_delete_user_leaves_no_row_about_the_person_in_any_table(
    clock: Clock, pg_db: PgDatabase
) -> None:
    async with PgSessionStore(pg_db, clock=clock) as backend:
        await _script(backend, clock)
        await backend.queue_message("k", ALICE, "telegram", "{}")
        await backend.delete_user(ALICE)
    async with pg_db.connection() as conn:
        for table in ("sessions", "inbox"):
            cur = await conn.execute(f"SELECT count(*) FROM {table} WHERE user_key = %s", (ALICE,))
            assert await cur.fetchone() == (0,)
        cur = await conn.execute(
            "SELECT count(*) FROM messages m WHERE NOT EXISTS "
            "(SELECT 1 FROM sessions s WHERE s.id = m.session_id AND s.user_key = %s)",
            (BOB,),
        )
        assert await cur.fetchone() == (0,)  # only Bob's message is left

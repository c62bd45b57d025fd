"""A thread is its own audience: its sessions are read only in its own scope.

A Discord thread's `chat_id` is its parent channel, so the scope must also
name the thread: from the channel (outside threads) nothing of a thread is
read, from a thread nothing of the channel, and a direct chat, which sees the
person's groups, sees none of their threads.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core.scopes import SearchScope, recall_scope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import MATCH_END, MATCH_START, NewMessage, SessionOrigin

ME = "discord-1"
CHANNEL = "5000"
THREAD = "5001"
IN_CHANNEL = recall_scope(ME, CHANNEL, "group")
IN_THREAD = recall_scope(ME, CHANNEL, "group", THREAD)
IN_DM = recall_scope(ME, "9", "private")


def where(chat: str, thread: str | None = None, chat_type: str = "group") -> SessionOrigin:
    key = ":".join(p for p in ("discord", chat_type, chat, thread, "1") if p is not None)
    return SessionOrigin(key, "discord", ME, chat, chat_type, thread_id=thread)  # type: ignore[arg-type]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SessionDB]:
    with SessionDB(tmp_path / "state.db") as opened:
        yield opened


def say(db: SessionDB, place: SessionOrigin, text: str, ts: float) -> int:
    result = db.append_message(origin=place, message=NewMessage("user", text, ts, key=str(ts)))
    return result.session_id


def texts(db: SessionDB, query: str, scope: SearchScope) -> list[str]:
    hits = db.search(query, scope)
    found = [s.text for h in hits for s in h.snippets]
    return [t.replace(MATCH_START, "").replace(MATCH_END, "") for t in found]


@pytest.fixture
def sessions(db: SessionDB) -> tuple[int, int, int]:
    """A private thread's session, its parent channel's, and the person's direct chat."""
    thread = say(db, where(CHANNEL, THREAD), "THREAD-ONLY: the surprise party is on friday", 1.0)
    channel = say(db, where(CHANNEL), "CHANNEL: the party playlist needs more jazz", 2.0)
    direct = say(db, where("9", chat_type="private"), "DM: party budget is small", 3.0)
    return thread, channel, direct


def test_the_channel_finds_nothing_of_its_thread_and_the_thread_nothing_of_the_channel(
    db: SessionDB, sessions: tuple[int, int, int]
) -> None:
    assert texts(db, "party", IN_CHANNEL) == ["CHANNEL: the party playlist needs more jazz"]
    assert texts(db, "surprise friday", IN_CHANNEL) == []
    assert texts(db, "party", IN_THREAD) == ["THREAD-ONLY: the surprise party is on friday"]
    assert texts(db, "playlist jazz", IN_THREAD) == []


def test_a_direct_chat_sees_the_persons_groups_but_none_of_their_threads(
    db: SessionDB, sessions: tuple[int, int, int]
) -> None:
    found = texts(db, "party", IN_DM)
    assert sorted(found) == [
        "CHANNEL: the party playlist needs more jazz",
        "DM: party budget is small",
    ]


def test_every_scoped_read_of_a_thread_session_from_outside_it_is_empty(
    db: SessionDB, sessions: tuple[int, int, int]
) -> None:
    thread, channel, _ = sessions
    db.set_system_prompt(thread, "thread prompt")
    for outside in (IN_CHANNEL, IN_DM, recall_scope(ME, "6000", "group", THREAD)):
        assert db.get_messages(thread, outside) == []
        assert db.get_system_prompt(thread, outside) is None
        assert thread not in {s.id for s in db.list_sessions(outside)}
    assert db.get_messages(channel, IN_THREAD) == []
    assert [m.content for m in db.get_messages(thread, IN_THREAD)] == [
        "THREAD-ONLY: the surprise party is on friday"
    ]
    assert db.get_system_prompt(thread, IN_THREAD) == "thread prompt"
    # The owner's own view (export, the operator's CLI) still holds the thread.
    assert thread in {s.id for s in db.list_sessions(SearchScope(ME))}


def test_a_thread_sessions_continuation_stays_in_the_thread(
    db: SessionDB, sessions: tuple[int, int, int]
) -> None:
    thread, _, _ = sessions
    child = db.start_child_session(thread)
    assert say(db, where(CHANNEL, THREAD), "CHILD: friday cake is chocolate", 5.0) == child
    info = db.get_session(child)
    assert info is not None and info.scope == IN_THREAD
    assert db.get_messages(child, IN_CHANNEL) == []
    assert texts(db, "chocolate cake", IN_CHANNEL) == []
    assert texts(db, "chocolate cake", IN_THREAD) == ["CHILD: friday cake is chocolate"]


def test_a_topic_of_one_group_is_not_the_same_numbered_topic_of_another(db: SessionDB) -> None:
    here = say(db, where("-100", "7"), "TOPIC-HERE zeppelin", 1.0)
    say(db, where("-200", "7"), "TOPIC-THERE zeppelin", 2.0)
    hits = db.search("zeppelin", recall_scope(ME, "-100", "group", "7"))
    assert [h.session_id for h in hits] == [here]


def test_a_stored_empty_thread_id_counts_as_no_thread(db: SessionDB) -> None:
    say(db, where(CHANNEL, ""), "EMPTY-THREAD walrus", 1.0)
    assert texts(db, "walrus", IN_CHANNEL) == ["EMPTY-THREAD walrus"]

"""Scope isolation, as a property: nobody's search returns another person's messages,
and a thread's messages come back only in that thread's scope."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.errors import InvalidMessageError
from memory_core.scopes import SearchScope, recall_scope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import (
    MATCH_END,
    MATCH_START,
    NewMessage,
    SearchOptions,
    SessionOrigin,
)
from tests.memory_core.sessions.helpers import origin

USERS = ["telegram-1", "telegram-2", "discord-3", "discord-4"]
GROUPS = ["group-a", "group-b"]
THREADS = ["t1", "t2"]  # the same thread id in two groups names two threads
# A shared vocabulary, so that queries match other people's messages too.
WORDS = ["apple", "river", "meeting", "天气", "服务器", "🎉", "plan", "secret", "tax", "猫"]

messages = st.lists(
    st.tuples(
        st.sampled_from(USERS),
        st.sampled_from([None, *GROUPS]),  # None: the user's direct chat
        st.sampled_from([None, *THREADS]),  # a thread of the group (ignored in a direct chat)
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
    ),
    min_size=1,
    max_size=25,
)
queries = st.lists(st.sampled_from([*WORDS, "天", "服务", "appl"]), min_size=1, max_size=3)


def unmarked(text: str) -> str:
    return text.replace(MATCH_START, "").replace(MATCH_END, "")


Place = tuple[str, str, str | None]
"""Where a session lives: (user, chat, thread)."""


def place_origin(user: str, chat: str, thread: str | None, group: bool) -> SessionOrigin:
    kind = "group" if group else "private"
    key = ":".join(p for p in ("telegram", kind, chat, thread, user) if p is not None)
    return SessionOrigin(key, "telegram", user, chat, kind, thread_id=thread)  # type: ignore[arg-type]


def scopes_of(user: str) -> list[SearchScope]:
    """The owner's views, and every recall scope the person can search from."""
    views = [
        SearchScope(user),
        SearchScope(user, f"dm-{user}"),
        *(SearchScope(user, g) for g in GROUPS),
    ]
    recalls = [recall_scope(user, f"dm-{user}", "private")]
    for group in GROUPS:
        recalls.append(recall_scope(user, group, "group"))
        recalls.extend(recall_scope(user, group, "group", t) for t in THREADS)
    return views + recalls


def visible(scope: SearchScope, place: Place) -> bool:
    """The rule the SQL must follow, written once more in Python."""
    user, chat, thread = place
    return (
        user == scope.user_key
        and scope.chat_id in (None, chat)
        and (scope.thread_id is None or scope.thread_id == thread)
        and not (scope.outside_threads and thread is not None)
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages, queries)
def test_every_hit_belongs_to_the_searcher(
    written: list[tuple[str, str | None, str | None, list[str]]], query_words: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as folder, SessionDB(Path(folder) / "state.db") as db:
        where_is: dict[int, Place] = {}
        texts: dict[Place, set[str]] = {}
        for n, (user, group, thread, words) in enumerate(written):
            place: Place = (user, group, thread) if group else (user, f"dm-{user}", None)
            text = f"{' '.join(words)} #{n}-{user}"
            result = db.append_message(
                origin=place_origin(*place, group=group is not None),
                message=NewMessage("user", text, float(n), key=str(n)),
            )
            where_is[result.session_id] = place
            texts.setdefault(place, set()).add(text)
        query = " ".join(query_words)
        for user in USERS:
            for scope in scopes_of(user):
                hits = db.search(query, scope, SearchOptions(limit=100))
                unseen = set().union(*(t for p, t in texts.items() if not visible(scope, p)))
                for hit in hits:
                    assert visible(scope, where_is[hit.session_id])
                    assert hit.chat_id == where_is[hit.session_id][1]
                    for snippet in hit.snippets:
                        text = unmarked(snippet.text)
                        assert text.endswith(f"-{user}")
                        assert text not in unseen
                # What a person can see is found: their own matching sessions all come back.
                expected = {
                    sid
                    for sid, place in where_is.items()
                    if visible(scope, place)
                    for m in db.get_messages(sid, SearchScope(user))
                    if any(_matches(w, m.content) for w in query_words)
                }
                assert {h.session_id for h in hits} == expected


def _matches(word: str, content: str) -> bool:
    text = content.rsplit(" #", 1)[0]
    if word.isascii() and word.isalpha():
        return any(token.startswith(word) for token in text.split())
    return word in text


def test_recall_sees_the_thread_in_a_thread_the_group_in_a_group_and_mine_in_a_direct_chat() -> (
    None
):
    assert recall_scope("telegram-1", "group-9", "group") == SearchScope(
        "telegram-1", "group-9", outside_threads=True
    )
    assert recall_scope("telegram-1", "1", "private") == SearchScope(
        "telegram-1", outside_threads=True
    )
    assert recall_scope("discord-1", "chan", "group", "777") == SearchScope(
        "discord-1", "chan", "777"
    )
    # a Telegram forum topic, and a topic of a private chat: the topic only
    assert recall_scope("telegram-1", "1", "private", "5") == SearchScope("telegram-1", "1", "5")
    assert recall_scope("telegram-1", "group-9", "group", "") == recall_scope(
        "telegram-1", "group-9", "group"
    )


@pytest.mark.parametrize(
    ("chat", "thread", "outside"),
    [(None, "7", False), ("c", "", False), ("c", "7", True)],
)
def test_a_scope_with_an_impossible_thread_is_refused(
    chat: str | None, thread: str, outside: bool
) -> None:
    with pytest.raises(InvalidMessageError):
        SearchScope("telegram-1", chat, thread, outside_threads=outside)


def test_a_stored_session_recalls_what_its_chat_may(tmp_path: Path) -> None:
    with SessionDB(tmp_path / "state.db") as db:
        group = db.append_message(
            origin=origin("telegram-1", "group-9", chat_type="group"),
            message=NewMessage("user", "hi all", 1.0, key="g"),
        )
        direct = db.append_message(
            origin=origin("telegram-1"), message=NewMessage("user", "hi", 2.0, key="d")
        )
        thread = db.append_message(
            origin=place_origin("discord-1", "chan", "777", group=True),
            message=NewMessage("user", "psst", 3.0, key="t"),
        )
        in_group, in_private = db.get_session(group.session_id), db.get_session(direct.session_id)
        in_thread = db.get_session(thread.session_id)
    assert in_group is not None
    assert in_group.scope == SearchScope("telegram-1", "group-9", outside_threads=True)
    assert in_private is not None
    assert in_private.scope == SearchScope("telegram-1", outside_threads=True)
    assert in_thread is not None and in_thread.scope == SearchScope("discord-1", "chan", "777")

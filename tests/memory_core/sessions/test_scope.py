"""Scope isolation, as a property: nobody's search returns another person's messages."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.scopes import SearchScope, recall_scope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import MATCH_END, MATCH_START, NewMessage, SearchOptions
from tests.memory_core.sessions.helpers import origin

USERS = ["telegram-1", "telegram-2", "discord-3", "discord-4"]
GROUPS = ["group-a", "group-b"]
# A shared vocabulary, so that queries match other people's messages too.
WORDS = ["apple", "river", "meeting", "天气", "服务器", "🎉", "plan", "secret", "tax", "猫"]

messages = st.lists(
    st.tuples(
        st.sampled_from(USERS),
        st.sampled_from([None, *GROUPS]),  # None: the user's direct chat
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
    ),
    min_size=1,
    max_size=25,
)
queries = st.lists(st.sampled_from([*WORDS, "天", "服务", "appl"]), min_size=1, max_size=3)


def unmarked(text: str) -> str:
    return text.replace(MATCH_START, "").replace(MATCH_END, "")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages, queries)
def test_every_hit_belongs_to_the_searcher(
    written: list[tuple[str, str | None, list[str]]], query_words: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as folder, SessionDB(Path(folder) / "state.db") as db:
        owner: dict[int, tuple[str, str]] = {}
        private_texts: dict[str, set[str]] = {u: set() for u in USERS}
        for n, (user, group, words) in enumerate(written):
            chat = group or f"dm-{user}"
            where = origin(user, chat, chat_type="group" if group else "private")
            text = f"{' '.join(words)} #{n}-{user}"
            result = db.append_message(
                origin=where, message=NewMessage("user", text, float(n), key=str(n))
            )
            owner[result.session_id] = (user, chat)
            if group is None:
                private_texts[user].add(text)
        query = " ".join(query_words)
        for user in USERS:
            for chat in (None, f"dm-{user}", *GROUPS):
                hits = db.search(query, SearchScope(user, chat), SearchOptions(limit=100))
                others_private = set().union(*(private_texts[u] for u in USERS if u != user))
                for hit in hits:
                    hit_user, hit_chat = owner[hit.session_id]
                    assert hit_user == user
                    assert chat is None or hit_chat == chat == hit.chat_id
                    for snippet in hit.snippets:
                        text = unmarked(snippet.text)
                        assert text.endswith(f"-{user}")
                        assert text not in others_private
                # What a person can see is found: their own matching sessions all come back.
                expected = {
                    sid
                    for sid, (u, c) in owner.items()
                    if u == user and (chat is None or c == chat)
                    for m in db.get_messages(sid, SearchScope(user))
                    if any(_matches(w, m.content) for w in query_words)
                }
                assert {h.session_id for h in hits} == expected


def _matches(word: str, content: str) -> bool:
    text = content.rsplit(" #", 1)[0]
    if word.isascii() and word.isalpha():
        return any(token.startswith(word) for token in text.split())
    return word in text


def test_recall_sees_only_the_group_in_a_group_and_everything_mine_in_a_direct_chat() -> None:
    assert recall_scope("telegram-1", "group-9", "group") == SearchScope("telegram-1", "group-9")
    assert recall_scope("telegram-1", "1", "private") == SearchScope("telegram-1")


def test_a_stored_session_recalls_what_its_chat_may(tmp_path: Path) -> None:
    with SessionDB(tmp_path / "state.db") as db:
        group = db.append_message(
            origin=origin("telegram-1", "group-9", chat_type="group"),
            message=NewMessage("user", "hi all", 1.0, key="g"),
        )
        direct = db.append_message(
            origin=origin("telegram-1"), message=NewMessage("user", "hi", 2.0, key="d")
        )
        in_group, in_private = db.get_session(group.session_id), db.get_session(direct.session_id)
    assert in_group is not None and in_group.scope == SearchScope("telegram-1", "group-9")
    assert in_private is not None and in_private.scope == SearchScope("telegram-1")

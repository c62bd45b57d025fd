"""The scope property's cases, for both stores: who wrote what where, and who may see it.

Users, groups and threads are drawn from small sets so that searches meet other
people's words; `Example` renames them with a suffix, so that many examples can
share one database without seeing each other (a hit from another example is a
leak like any other: its session is not among this example's).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from memory_core.scopes import SearchScope, recall_scope
from memory_core.sessions.models import MATCH_END, MATCH_START, SessionOrigin

USERS = ["telegram-1", "telegram-2", "discord-3", "discord-4"]
GROUPS = ["group-a", "group-b"]
THREADS = ["t1", "t2"]  # the same thread id in two groups names two threads
# A shared vocabulary, so that queries match other people's messages too.
WORDS = ["apple", "river", "meeting", "天气", "服务器", "🎉", "plan", "secret", "tax", "猫"]

Written = list[tuple[str, str | None, str | None, list[str]]]
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

Place = tuple[str, str, str | None]
"""Where a session lives: (user, chat, thread)."""


def unmarked(text: str) -> str:
    return text.replace(MATCH_START, "").replace(MATCH_END, "")


def place_origin(user: str, chat: str, thread: str | None, group: bool) -> SessionOrigin:
    kind = "group" if group else "private"
    key = ":".join(p for p in ("telegram", kind, chat, thread, user) if p is not None)
    return SessionOrigin(key, "telegram", user, chat, kind, thread_id=thread)  # type: ignore[arg-type]


def visible(scope: SearchScope, place: Place) -> bool:
    """The rule the SQL must follow, written once more in Python."""
    user, chat, thread = place
    return (
        user == scope.user_key
        and scope.chat_id in (None, chat)
        and (scope.thread_id is None or scope.thread_id == thread)
        and not (scope.outside_threads and thread is not None)
    )


def matches(word: str, content: str) -> bool:
    text = content.rsplit(" #", 1)[0]
    if word.isascii() and word.isalpha():
        return any(token.startswith(word) for token in text.split())
    return word in text


@dataclass(frozen=True)
class Example:
    """One drawn example, its people and groups renamed with `suffix`."""

    written: Written
    suffix: str = ""

    def user(self, user: str) -> str:
        return f"{user}{self.suffix}"

    def group(self, group: str) -> str:
        return f"{group}{self.suffix}"

    @property
    def users(self) -> list[str]:
        return [self.user(u) for u in USERS]

    def messages(self) -> list[tuple[Place, SessionOrigin, str]]:
        """Each message: where it lives, the origin that stores it there, its text."""
        found = []
        for n, (drawn, group, thread, words) in enumerate(self.written):
            user = self.user(drawn)
            place: Place = (
                (user, self.group(group), thread) if group else (user, f"dm-{user}", None)
            )
            text = f"{' '.join(words)} #{n}-{user}"
            found.append((place, place_origin(*place, group=group is not None), text))
        return found

    def scopes_of(self, user: str) -> list[SearchScope]:
        """The owner's views, and every recall scope the person can search from."""
        groups = [self.group(g) for g in GROUPS]
        views = [SearchScope(user), SearchScope(user, f"dm-{user}")]
        views += [SearchScope(user, g) for g in groups]
        recalls = [recall_scope(user, f"dm-{user}", "private")]
        for group in groups:
            recalls.append(recall_scope(user, group, "group"))
            recalls.extend(recall_scope(user, group, "group", t) for t in THREADS)
        return views + recalls

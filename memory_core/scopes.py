"""Chat types and search scopes: whose history recall may see from a chat.

`recall_scope` is the one rule for it. These values sit below the session
store, so code that only routes a message can name them without loading it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from memory_core.errors import InvalidMessageError

ChatType = Literal["private", "group"]
CHAT_TYPES: frozenset[str] = frozenset(get_args(ChatType))


@dataclass(frozen=True)
class SearchScope:
    """Whose history a search may see: one person, optionally one chat, and which threads.

    `thread_id` narrows the scope to one thread of `chat_id` (a Discord thread,
    a Telegram forum topic); `outside_threads` leaves out every session held
    in a thread. Neither: the person's sessions in and out of threads (the
    owner's own view: export, the operator's CLI).
    """

    user_key: str
    chat_id: str | None = None
    thread_id: str | None = None
    outside_threads: bool = False

    def __post_init__(self) -> None:
        if not self.user_key:
            raise InvalidMessageError("a search scope needs a user key")
        if self.thread_id is None:
            return
        if not self.thread_id:
            raise InvalidMessageError("a search scope's thread id must not be empty")
        if self.chat_id is None:
            raise InvalidMessageError("a search scope's thread needs its chat")
        if self.outside_threads:
            raise InvalidMessageError("a search scope cannot be in a thread and outside threads")


def recall_scope(
    user_key: str, chat_id: str, chat_type: ChatType, thread_id: str | None = None
) -> SearchScope:
    """What recall may see from a chat.

    In a thread (or forum topic), that thread only, public or private: a
    thread is its own audience. In a group outside threads, that group's
    sessions that are in no thread. In a direct chat, all of the person's
    history (their direct chats and their groups) except what was said in
    threads. Anything but ``"private"`` counts as a group, so a bad value can
    only narrow recall; an empty thread id means no thread.
    """
    if thread_id:
        return SearchScope(user_key, chat_id, thread_id)
    return SearchScope(user_key, None if chat_type == "private" else chat_id, outside_threads=True)

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
    """Whose history a search may see: one person, optionally one chat."""

    user_key: str
    chat_id: str | None = None

    def __post_init__(self) -> None:
        if not self.user_key:
            raise InvalidMessageError("a search scope needs a user key")


def recall_scope(user_key: str, chat_id: str, chat_type: ChatType) -> SearchScope:
    """What recall may see from a chat: in a group, only that group; in a direct
    chat, all of the person's history (their direct chats and their groups).

    Anything but ``"private"`` counts as a group, so a bad value can only narrow recall.
    """
    return SearchScope(user_key, None if chat_type == "private" else chat_id)

"""Value types of the session store: search options, messages, sessions, hits,
and the per-session counters of the background review.

Two words are kept apart: the `platform` of a person (telegram, discord,
console; the first part of their user key) and the `source` of a session,
which is the platform it came from or, for the background agents' own
sessions, one of `INTERNAL_SOURCES` (review, extraction). Chat types and
search scopes (`recall_scope`, the one recall rule) live in `memory_core.scopes`,
the store's errors in `memory_core.errors`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memory_core.errors import InvalidMessageError
from memory_core.scopes import CHAT_TYPES, ChatType, SearchScope, recall_scope

MATCH_START = ">>>"
MATCH_END = "<<<"

ROLES = frozenset({"user", "assistant", "system", "tool"})
INTERNAL_SOURCES = ("review", "extraction")


@dataclass(frozen=True)
class SearchOptions:
    """How a search is narrowed within its scope, and how many conversations it returns.

    `since` (inclusive) and `until` (exclusive) bound the message times;
    `exclude_lineage_of` leaves out the conversation that session belongs to
    (the current one, for recall); sessions whose source is internal (review,
    extraction) are left out unless `include_internal`. `max_hits_per_term`
    bounds how many of the newest matching messages each term contributes
    (the work a search does on a very long history); `snippets_per_hit`, how
    many of a conversation's best messages come back as snippets (0: none,
    for callers that need only the ranking).
    """

    since: float | None = None
    until: float | None = None
    limit: int = 10
    exclude_lineage_of: int | None = None
    include_internal: bool = False
    max_hits_per_term: int = 5000
    snippets_per_hit: int = 3


DEFAULT_SEARCH_OPTIONS = SearchOptions()


@dataclass(frozen=True)
class Snippet:
    """One matching message; matches in `text` sit between MATCH_START and MATCH_END."""

    message_id: int
    role: str
    timestamp: float
    text: str


@dataclass(frozen=True)
class SessionHit:
    """A matching conversation, reported by the root session of its lineage."""

    session_id: int
    external_id: str | None
    source: str  # a platform, or review / extraction
    chat_id: str
    chat_type: ChatType
    started_at: float
    ended_at: float | None
    score: float
    snippets: tuple[Snippet, ...]


@dataclass(frozen=True)
class SessionOrigin:
    """Where a session lives: its routing key and owner, used to create it lazily.

    `source` is the platform the conversation happens on, or review / extraction
    for a background agent's session.
    """

    session_key: str
    source: str
    user_key: str
    chat_id: str
    chat_type: ChatType
    thread_id: str | None = None
    model: str | None = None
    title: str | None = None

    def __post_init__(self) -> None:
        for name in ("session_key", "source", "user_key", "chat_id"):
            if not getattr(self, name):
                raise InvalidMessageError(f"session {name} must not be empty")
        if self.chat_type not in CHAT_TYPES:
            raise InvalidMessageError(f"chat type {self.chat_type!r} is not private or group")


@dataclass(frozen=True)
class NewMessage:
    """A message to append.

    A message is identified inside its session by `platform_message_id` when
    the platform gave one, else by `key`, a stable caller-chosen key (for
    example ``"<turn id>:<index>"``); at least one is required, so writing the
    same turn twice adds nothing.
    """

    role: str
    content: str
    timestamp: float
    platform_message_id: str | None = None
    key: str | None = None
    tool_name: str | None = None
    tool_calls: str | None = None
    tool_call_id: str | None = None
    speaker_name: str | None = None
    own_words: bool = True  # False: forwarded (not the speaker's own words)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidMessageError(f"role {self.role!r} is not one of {sorted(ROLES)}")
        if not isinstance(self.content, str):
            raise InvalidMessageError("message content must be a string")
        if not isinstance(self.timestamp, int | float) or not math.isfinite(self.timestamp):
            raise InvalidMessageError(f"timestamp {self.timestamp!r} is not a finite number")
        if self.platform_message_id is None and self.key is None:
            raise InvalidMessageError("a message needs a platform_message_id or a stable key")


@dataclass(frozen=True)
class AppendResult:
    """What a write did: the session used, whether it was created, the message ids."""

    session_id: int
    session_created: bool
    message_ids: tuple[int, ...]
    inserted: int


@dataclass(frozen=True)
class SessionInfo:
    """One stored session row."""

    id: int
    source: str  # a platform, or review / extraction
    user_key: str
    chat_id: str
    chat_type: ChatType
    thread_id: str | None
    session_key: str | None
    title: str | None
    model: str | None
    started_at: float
    ended_at: float | None
    end_reason: str | None
    parent_session_id: int | None
    root_id: int
    external_id: str | None

    @property
    def scope(self) -> SearchScope:
        """What this session may recall: `recall_scope` of its owner, chat and thread."""
        return recall_scope(self.user_key, self.chat_id, self.chat_type, self.thread_id)


@dataclass(frozen=True)
class StoredMessage:
    """One stored message row."""

    id: int
    session_id: int
    role: str
    content: str
    timestamp: float
    tool_name: str | None
    tool_calls: str | None
    tool_call_id: str | None
    platform_message_id: str | None
    speaker_name: str | None
    own_words: bool = True  # False: forwarded (not the speaker's own words)


@dataclass(frozen=True)
class EditedMessage:
    """A person's stored message after an edit or deletion on its platform.

    `id` is the message as first stored, in `session_id`; `message_ids` holds it
    and the copies a compression carried into later sessions of its conversation,
    all changed alike. `old_text` is what was stored; `text` the new text (None:
    deleted: the row stays, empty and no longer the person's own words). Equal
    texts: nothing was changed.
    """

    id: int
    session_id: int
    user_key: str
    old_text: str
    text: str | None
    message_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class ReviewCounters:
    """A session's counters for the background review, as stored.

    `turns_since_memory`: turns since the last memory write (or since the
    session started); `steps_since_skill`: tool steps since the last skill write.
    """

    turns_since_memory: int = 0
    steps_since_skill: int = 0


@dataclass(frozen=True)
class CounterUpdate:
    """How one turn moves a session's `ReviewCounters`.

    Each counter is first reset to 0 when its `*_written` flag is set, then
    `turns` / `steps` are added: a turn that wrote memory passes
    ``memory_written=True, turns=0``; a turn whose last skill write was
    followed by two more tool steps passes ``skill_written=True, steps=2``.
    """

    turns: int = 0
    steps: int = 0
    memory_written: bool = False
    skill_written: bool = False

    def __post_init__(self) -> None:
        if self.turns < 0 or self.steps < 0:
            raise InvalidMessageError("counter increments must not be negative")


@dataclass(frozen=True)
class BacklogEntry:
    """A session with messages the extraction agent has not covered yet.

    `ended_at` is None for an open session (a quiet-time extraction keeps it
    open); set, the session ended and its session-end extraction is due.
    `extracted_through` is the id of the last message already extracted (0:
    none); `pending_messages` counts the messages after it.
    """

    session_id: int
    session_key: str | None
    user_key: str
    chat_id: str
    chat_type: ChatType
    thread_id: str | None
    source: str
    ended_at: float | None
    end_reason: str | None
    extracted_through: int
    last_message_id: int
    last_message_at: float
    pending_messages: int


@dataclass(frozen=True)
class ReviewDue:
    """An open session whose review counters reached a background review's threshold."""

    session_id: int
    session_key: str | None
    user_key: str
    turns_since_memory: int
    steps_since_skill: int

"""`SessionBackend`: what the bot asks of a session store, whichever database holds it.

`SessionStore` (SQLite, state.db) and `memory_core.pg.PgSessionStore`
(PostgreSQL) both provide it, with the same semantics and return values; a
contract test runs one set of tests against both. Code above the store names
only this protocol, so it never knows which backend it talks to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import IO, Protocol

from memory_core.fence import ErasureFence
from memory_core.scopes import SearchScope
from memory_core.sessions.activity import SessionActivity
from memory_core.sessions.erase import UserTotals
from memory_core.sessions.inbox import QueuedMessage
from memory_core.sessions.jsonl import ImportResult
from memory_core.sessions.locks import SessionMark
from memory_core.sessions.models import (
    DEFAULT_SEARCH_OPTIONS,
    AppendResult,
    BacklogEntry,
    CounterUpdate,
    EditedMessage,
    NewMessage,
    ReviewCounters,
    ReviewDue,
    SearchOptions,
    SessionHit,
    SessionInfo,
    SessionOrigin,
    StoredMessage,
)
from memory_core.sessions.writes import DeleteResult


class SessionBackend(Protocol):
    """The async session store: appends, sessions and lineage, the backlog, reads, search."""

    fence: ErasureFence

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> SessionBackend: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def flush(self, timeout: float) -> bool: ...

    # writes
    async def append_message(
        self, *, origin: SessionOrigin, message: NewMessage
    ) -> AppendResult: ...

    async def append_messages(
        self,
        *,
        origin: SessionOrigin,
        messages: Sequence[NewMessage],
        counters: CounterUpdate | None = None,
    ) -> AppendResult: ...

    async def set_system_prompt(self, session_id: int, prompt: str) -> str: ...

    async def clear_system_prompts(self, user_key: str) -> int: ...

    async def end_session(self, session_id: int, reason: str) -> None: ...

    async def start_child_session(
        self,
        parent_id: int,
        *,
        end_reason: str = "compression",
        model: str | None = None,
        title: str | None = None,
        messages: Sequence[NewMessage] = (),
    ) -> int: ...

    async def migrate_chat(self, source: str, old_chat_id: str, new_chat_id: str) -> int: ...

    async def record_notice(self, message_id: int, notice: str) -> bool: ...

    async def unanswered(
        self, source: str, since: float, limit: int = 100, session_key: str | None = None
    ) -> list[tuple[SessionInfo, StoredMessage]]: ...

    async def queue_message(
        self, session_key: str, user_key: str, source: str, payload: str
    ) -> int: ...

    async def drop_queued(self, queue_id: int) -> None: ...

    async def queued_messages(self, source: str) -> list[QueuedMessage]: ...

    async def queued_for(self, session_key: str) -> list[QueuedMessage]:
        """The messages of one session still waiting, oldest first (`queued_messages`
        narrowed to `session_key`, by an index of the queue on it)."""
        ...

    async def first_delivery(self, platform: str, delivery: str) -> bool:
        """Record that `delivery` (a command's or a button press's key on `platform`)
        arrived; whether it is the first time. Kept as a digest, two days (`deliveries`)."""
        ...

    async def delete_user(self, user_key: str, *, purge: bool = True) -> DeleteResult: ...

    async def edit_message(
        self,
        *,
        platform: str,
        chat_id: str,
        platform_message_id: str,
        user_key: str | None,
        text: str | None,
    ) -> EditedMessage | None:
        """A person's stored message (None: anyone's in that chat) gets its edited text
        (None: deleted, the row kept empty); None when no such message is stored."""
        ...

    async def forget_words(
        self, user_key: str, message_ids: Sequence[int], texts: Sequence[str]
    ) -> int:
        """The messages `message_ids` become a marker and every occurrence of `texts` in
        the person's sessions too, for good; how many rows changed."""
        ...

    # background work
    async def mark_extracted(
        self, session_id: int, through_message_id: int, *, finished: bool
    ) -> None: ...

    async def reset_counters(self, session_id: int) -> None: ...

    async def extraction_progress(self, session_id: int) -> int | None: ...

    async def pending_extractions(self, limit: int = 100) -> list[BacklogEntry]: ...

    async def quiet_sessions(self, before: float, limit: int = 100) -> list[BacklogEntry]: ...

    async def reviews_due(self, turns: int, steps: int, limit: int = 100) -> list[ReviewDue]: ...

    # reads
    async def search(
        self, query: str, scope: SearchScope, options: SearchOptions = DEFAULT_SEARCH_OPTIONS
    ) -> list[SessionHit]: ...

    async def active_sessions(
        self, scope: SearchScope, options: SearchOptions = DEFAULT_SEARCH_OPTIONS
    ) -> tuple[list[SessionActivity], int]: ...

    async def get_session(self, session_id: int) -> SessionInfo | None: ...

    async def current_session(self, session_key: str) -> SessionInfo | None: ...

    async def get_messages(
        self, session_id: int, scope: SearchScope, *, lineage: bool = True
    ) -> list[StoredMessage]: ...

    async def list_sessions(self, scope: SearchScope, limit: int = 20) -> list[SessionInfo]: ...

    async def session_mark(self, session_key: str) -> SessionMark | None: ...

    async def get_system_prompt(self, session_id: int, scope: SearchScope) -> str | None: ...

    async def get_counters(self, session_id: int) -> ReviewCounters | None: ...

    async def user_totals(self, user_key: str) -> UserTotals: ...

    async def all_user_totals(self) -> list[UserTotals]: ...

    async def user_session_keys(self, user_key: str) -> list[str]: ...

    async def export_lines(self, user_key: str) -> list[str]: ...

    # operator work
    async def import_lines(
        self, lines: IO[bytes], progress: Callable[[int], None] | None = None
    ) -> ImportResult:
        """JSON Lines in, all or nothing; `progress` told of each batch of lines done."""
        ...

    async def check(self, echo: Callable[[str], None]) -> None:
        """Look the store over, each passed check told to `echo`; raise on a problem."""
        ...

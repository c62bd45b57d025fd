"""The session store: every conversation in ``<home>/state.db``, and search over it.

`SessionStore` is the async store the bot uses (one writer thread, pooled
readers); `SessionDB` is the synchronous one the command line and the
benchmarks use. Both append `NewMessage`s to the session of a `SessionOrigin`,
read `SessionInfo` and `StoredMessage` rows, and search within a `SearchScope`
(`recall_scope` gives the one recall rule) narrowed by `SearchOptions`,
returning ranked `SessionHit`s. A session keeps the system prompt it started
with and its `ReviewCounters` (moved by a `CounterUpdate` with each turn), so
it resumes unchanged after a restart. The store also keeps the background work's
backlog: how far extraction got per session, the `BacklogEntry`s still to
extract, and the `ReviewDue` sessions. A person's edit or deletion reaches their
stored message (`EditedMessage`), and `/forget` replaces the texts it names with
`FORGOTTEN` everywhere in their sessions. History moves in and out as JSON Lines, and
`parse_time_phrase` reads phrases like "last week" into a time window.
"""

from memory_core.errors import (
    ImportFormatError,
    IndexIntegrityError,
    InvalidMessageError,
    ReadTimeoutError,
    SchemaVersionError,
    SessionConflictError,
    SessionNotFoundError,
    SessionStoreBusyError,
    SessionStoreError,
)
from memory_core.scopes import CHAT_TYPES, ChatType, SearchScope, recall_scope
from memory_core.sessions.activity import SessionActivity
from memory_core.sessions.connection import ConnectHook, sqlite_problem
from memory_core.sessions.db import SessionDB
from memory_core.sessions.erase import UserTotals
from memory_core.sessions.forgetting import FORGOTTEN
from memory_core.sessions.inbox import QueuedMessage
from memory_core.sessions.jobs import ClaimedJob, InProcessJobs, JobQueue, JobRequest, OpenJob
from memory_core.sessions.jsonl import ImportResult, parse_timestamp
from memory_core.sessions.locks import LOST_WITHIN
from memory_core.sessions.models import (
    DEFAULT_SEARCH_OPTIONS,
    INTERNAL_SOURCES,
    MATCH_END,
    MATCH_START,
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
    Snippet,
    StoredMessage,
)
from memory_core.sessions.query import STOPWORDS
from memory_core.sessions.search import DEFAULT_RANKING, Ranking, search_sessions
from memory_core.sessions.store import SessionStore
from memory_core.sessions.time_phrases import TimeWindow, parse_time_phrase
from memory_core.sessions.writer import Backoff, WritePolicy
from memory_core.sessions.writes import DeleteResult

__all__ = [
    "CHAT_TYPES",
    "DEFAULT_RANKING",
    "DEFAULT_SEARCH_OPTIONS",
    "FORGOTTEN",
    "INTERNAL_SOURCES",
    "LOST_WITHIN",
    "MATCH_END",
    "MATCH_START",
    "STOPWORDS",
    "AppendResult",
    "BacklogEntry",
    "Backoff",
    "ChatType",
    "ClaimedJob",
    "ConnectHook",
    "CounterUpdate",
    "DeleteResult",
    "EditedMessage",
    "ImportFormatError",
    "ImportResult",
    "InProcessJobs",
    "IndexIntegrityError",
    "InvalidMessageError",
    "JobQueue",
    "JobRequest",
    "NewMessage",
    "OpenJob",
    "QueuedMessage",
    "Ranking",
    "ReadTimeoutError",
    "ReviewCounters",
    "ReviewDue",
    "SchemaVersionError",
    "SearchOptions",
    "SearchScope",
    "SessionActivity",
    "SessionConflictError",
    "SessionDB",
    "SessionHit",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionOrigin",
    "SessionStore",
    "SessionStoreBusyError",
    "SessionStoreError",
    "Snippet",
    "StoredMessage",
    "TimeWindow",
    "UserTotals",
    "WritePolicy",
    "parse_time_phrase",
    "parse_timestamp",
    "recall_scope",
    "search_sessions",
    "sqlite_problem",
]

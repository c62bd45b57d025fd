"""Mnemo's memory library: file memory, session store and search, providers,
context wrapping and scrubbing, the safety scan, and the skills store.

It is usable without the gateway and imports nothing from it.
"""

from memory_core.atomic import atomic_write_text
from memory_core.context import (
    StreamingContextScrubber,
    append_memory_context,
    sanitize_context,
    scrub_context,
    wrap_memory_context,
)
from memory_core.errors import (
    AtomicWriteError,
    InvalidUserKeyError,
    MemoryCoreError,
    MemoryDriftError,
    MemoryFileError,
    MemoryLockError,
    MemoryPermissionError,
    ProviderError,
    SessionStoreError,
    SkillError,
    UnsafeContentError,
)
from memory_core.file_memory.render import MemorySnapshot
from memory_core.file_memory.store import (
    FileMemoryStore,
    MemoryState,
    WriteResult,
)
from memory_core.file_memory.tool import (
    MEMORY_TOOL_SCHEMA,
    MemoryRequest,
    MemoryTool,
)
from memory_core.providers import (
    HistoryRecallProvider,
    MemoryManager,
    MemoryProvider,
    ProviderRegistry,
    ProviderResources,
    SessionContext,
    TranscriptMessage,
    default_registry,
)
from memory_core.safety import Finding, scan, scan_all
from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import (
    AppendResult,
    NewMessage,
    SearchScope,
    SessionHit,
    SessionInfo,
    SessionOrigin,
    Snippet,
    StoredMessage,
)
from memory_core.sessions.store import SessionStore
from memory_core.sessions.time_phrases import parse_time_phrase
from memory_core.skills.store import Skill, SkillProblem, SkillsStore
from memory_core.skills.tools import SKILL_TOOL_SCHEMAS, SkillsTools
from memory_core.user_keys import check_user_key, make_user_key

__all__ = [
    "MEMORY_TOOL_SCHEMA",
    "SKILL_TOOL_SCHEMAS",
    "AppendResult",
    "AtomicWriteError",
    "FileMemoryStore",
    "Finding",
    "HistoryRecallProvider",
    "InvalidUserKeyError",
    "MemoryCoreError",
    "MemoryDriftError",
    "MemoryFileError",
    "MemoryLockError",
    "MemoryManager",
    "MemoryPermissionError",
    "MemoryProvider",
    "MemoryRequest",
    "MemorySnapshot",
    "MemoryState",
    "MemoryTool",
    "NewMessage",
    "ProviderError",
    "ProviderRegistry",
    "ProviderResources",
    "SearchScope",
    "SessionContext",
    "SessionDB",
    "SessionHit",
    "SessionInfo",
    "SessionOrigin",
    "SessionStore",
    "SessionStoreError",
    "Skill",
    "SkillError",
    "SkillProblem",
    "SkillsStore",
    "SkillsTools",
    "Snippet",
    "StoredMessage",
    "StreamingContextScrubber",
    "TranscriptMessage",
    "UnsafeContentError",
    "WriteResult",
    "append_memory_context",
    "atomic_write_text",
    "check_user_key",
    "default_registry",
    "make_user_key",
    "parse_time_phrase",
    "sanitize_context",
    "scan",
    "scan_all",
    "scrub_context",
    "wrap_memory_context",
]

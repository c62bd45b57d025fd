"""Memory providers: the interface, the registry, the per-session manager and its worker.

A `MemoryProvider` adds recall to a session described by a `SessionContext`;
`HistoryRecallProvider` is the built-in one, over the session store.
`ProviderRegistry` creates the providers a configuration selects (built-ins and
entry points), and a `MemoryManager` drives one session's providers under
timeouts, handing their writes to a shared `BackgroundWorker`.
"""

from memory_core.errors import ProviderError
from memory_core.providers.base import AgentKind, MemoryProvider, SessionContext, TranscriptMessage
from memory_core.providers.history import HistoryRecallProvider, SessionSearcher
from memory_core.providers.manager import MemoryManager
from memory_core.providers.registry import (
    ENTRY_POINT_GROUP,
    ProviderFactory,
    ProviderRegistry,
    ProviderResources,
    default_registry,
)
from memory_core.providers.worker import BackgroundWorker

__all__ = [
    "ENTRY_POINT_GROUP",
    "AgentKind",
    "BackgroundWorker",
    "HistoryRecallProvider",
    "MemoryManager",
    "MemoryProvider",
    "ProviderError",
    "ProviderFactory",
    "ProviderRegistry",
    "ProviderResources",
    "SessionContext",
    "SessionSearcher",
    "TranscriptMessage",
    "default_registry",
]

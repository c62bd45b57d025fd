"""Memory providers: the interface, the registry and the per-session manager."""

from memory_core.errors import ProviderError
from memory_core.providers.base import (
    AgentKind,
    MemoryProvider,
    SessionContext,
    TranscriptMessage,
)
from memory_core.providers.history import HistoryRecallProvider
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
    "TranscriptMessage",
    "default_registry",
]

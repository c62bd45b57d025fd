"""File memory: the shared MEMORY.md and one USER.md per person, as `§`-separated entries.

`FileMemoryStore` reads the files, renders them into a `MemorySnapshot` for the
system prompt, and applies `Operation`s all-or-nothing under a file lock.
`MemoryTool` is the one way to change them, for the model (`MEMORY_TOOL_SCHEMA`)
and the operator's command line alike: it decides who may write what.
"""

from memory_core.errors import (
    AmbiguousMatchError,
    BatchRejectedError,
    EntryTooLongError,
    InvalidArgumentsError,
    InvalidEntryError,
    MemoryDriftError,
    MemoryEditError,
    MemoryFileError,
    MemoryLockError,
    MemoryPermissionError,
    MissingOldTextError,
    NoMatchError,
    OverBudgetError,
    UndecodableMemoryError,
    UndoRefusedError,
    UnreadableMemoryError,
)
from memory_core.file_memory.approval import Approval
from memory_core.file_memory.backend import MemoryBackend
from memory_core.file_memory.edits import Operation
from memory_core.file_memory.ledger import (
    ArchivedEntry,
    EntryOrigin,
    LedgerChange,
)
from memory_core.file_memory.origin import OPERATOR, Evidence, Origin
from memory_core.file_memory.pending import Decision, PendingChanges, Proposal, StagedChange
from memory_core.file_memory.records import PersonRecord
from memory_core.file_memory.render import MemorySnapshot, entry_handle
from memory_core.file_memory.settings import (
    NOTICE_MODES,
    NoticeMode,
    PersonSettings,
    PersonSettingsStore,
)
from memory_core.file_memory.store import (
    TARGETS,
    FileMemoryStore,
    MemoryState,
    Target,
    UndoResult,
    WriteResult,
)
from memory_core.file_memory.tool import (
    MEMORY_TOOL_SCHEMA,
    GroundedArguments,
    MemoryChange,
    MemoryRequest,
    MemoryTool,
)

__all__ = [
    "MEMORY_TOOL_SCHEMA",
    "NOTICE_MODES",
    "OPERATOR",
    "TARGETS",
    "AmbiguousMatchError",
    "Approval",
    "ArchivedEntry",
    "BatchRejectedError",
    "Decision",
    "EntryOrigin",
    "EntryTooLongError",
    "Evidence",
    "FileMemoryStore",
    "GroundedArguments",
    "InvalidArgumentsError",
    "InvalidEntryError",
    "LedgerChange",
    "MemoryBackend",
    "MemoryChange",
    "MemoryDriftError",
    "MemoryEditError",
    "MemoryFileError",
    "MemoryLockError",
    "MemoryPermissionError",
    "MemoryRequest",
    "MemorySnapshot",
    "MemoryState",
    "MemoryTool",
    "MissingOldTextError",
    "NoMatchError",
    "NoticeMode",
    "Operation",
    "Origin",
    "OverBudgetError",
    "PendingChanges",
    "PersonRecord",
    "PersonSettings",
    "PersonSettingsStore",
    "Proposal",
    "StagedChange",
    "Target",
    "UndecodableMemoryError",
    "UndoRefusedError",
    "UndoResult",
    "UnreadableMemoryError",
    "WriteResult",
    "entry_handle",
]

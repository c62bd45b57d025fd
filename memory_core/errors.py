"""Errors of the memory_core package.

MemoryCoreError
 ├── AtomicWriteError             a crash-safe write failed (atomic)
 ├── InvalidEntryError            an entry cannot be stored (entries)
 ├── InvalidUserKeyError          a user key is not path-safe (user_keys)
 ├── UnsafeContentError           the safety scan refused the text (safety)
 ├── MemoryFileError              MEMORY.md / USER.md (file_memory)
 │    ├── UnreadableMemoryError ── UndecodableMemoryError
 │    ├── MemoryDriftError        edited by hand; backup kept, write refused
 │    └── MemoryLockError
 ├── MemoryEditError              an operation is refused (memory_edits)
 │    ├── MissingOldTextError, NoMatchError, AmbiguousMatchError
 │    └── EntryTooLongError, OverBudgetError
 ├── BatchRejectedError           one operation of a batch failed; nothing applied
 ├── InvalidArgumentsError, MemoryPermissionError   (memory_tool)
 ├── SessionStoreError            state.db (session_models)
 │    ├── SchemaVersionError, IndexIntegrityError, InvalidMessageError
 │    ├── SessionNotFoundError, SessionConflictError
 │    └── ImportFormatError       a bad line in an import file
 ├── SkillError                   skills (skills_format, skills_store, skills_tools)
 │    ├── SkillFormatError ── SkillPathError
 │    ├── SkillSizeError, SkillPatchError, SkillArgumentError
 │    └── SkillNotFoundError, SkillExistsError, SkillProtectedError,
 │        SkillManifestError, SkillStorageError
 └── ProviderError                memory providers (providers.base)
"""


class MemoryCoreError(Exception):
    """Root of every error raised by memory_core."""

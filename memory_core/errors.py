"""
MemoryCoreError
 ├── PersonErasedError                  the person was erased after the writing work began
 ├── AtomicWriteError                   a crash-safe write failed; the old file is untouched
 ├── DocumentError                      a small document could not be read, locked or written
 ├── InvalidEntryError                  content cannot be stored as one memory entry
 ├── InvalidUserKeyError                a user key is not a well-formed, path-safe key
 ├── UnsafeContentError                 the safety scan refused the text
 ├── MemoryFileError                    MEMORY.md / USER.md could not be read or written
 │    ├── UnreadableMemoryError         the file cannot be read
 │    │    └── UndecodableMemoryError   the file holds bytes that are not UTF-8
 │    ├── MemoryDriftError              edited by hand out of shape; backup kept, write refused
 │    └── MemoryLockError               the file's lock is busy or unsafe
 ├── MemoryEditError                    an edit of the entries was refused
 │    ├── MissingOldTextError           replace or remove without old_text
 │    ├── NoMatchError                  no entry contains old_text
 │    ├── AmbiguousMatchError           several entries contain old_text
 │    ├── EntryTooLongError             one entry is longer than the whole budget
 │    ├── OverBudgetError               the final state would exceed the budget
 │    └── UndoRefusedError              an undo that cannot be done (a later change, a hand edit)
 ├── BatchRejectedError                 one operation of a batch failed; nothing applied
 ├── InvalidArgumentsError              the memory tool's arguments are malformed
 ├── MemoryPermissionError              the caller may not write this memory target
 ├── StagingLimitError                  no more entries may wait (flagged today, or at all)
 ├── SessionStoreError                  state.db refused or could not do something
 │    ├── SchemaVersionError            state.db was written by a newer Mnemo
 │    ├── IndexIntegrityError           the database or a full-text index is damaged
 │    ├── InvalidMessageError           a message or session field is not acceptable
 │    ├── SessionNotFoundError          no session with that id
 │    ├── SessionConflictError          the write contradicts a stored session
 │    ├── SessionStoreBusyError         state.db stayed locked; the write is kept and retried
 │    ├── ReadTimeoutError              a read ran past the store's time limit and was stopped
 │    └── ImportFormatError             a bad line in an import file
 ├── PostgresError                      PostgreSQL refused or could not do something
 │    ├── PostgresUnavailableError      the server could not be reached in time
 │    ├── PostgresSchemaError           the database's schema is not this code's (edited, newer)
 │    └── PostgresConflictError         a transaction kept conflicting with others past its retries
 ├── SkillError                         a skills error; the message is safe to show the model
 │    ├── SkillFormatError              a SKILL.md, name, category or path breaks the rules
 │    │    └── SkillPathError           a support-file path is not allowed
 │    ├── SkillSizeError                content is over a size limit
 │    ├── SkillPatchError               old_string not found, or found more than once
 │    ├── SkillArgumentError            a skills tool call's arguments are wrong
 │    ├── SkillNotFoundError            no valid skill or support file by that name
 │    ├── SkillExistsError              a skill or folder of that name exists
 │    ├── SkillProtectedError           the skill is shared or not the caller's to change
 │    ├── SkillQuotaError               this turn has written as much as one turn may
 │    ├── SkillManifestError            the authorship manifest cannot be read or locked
 │    └── SkillStorageError             the filesystem refused a change
 └── ProviderError                      a memory provider failed or cannot be used
"""

# Every error memory_core raises, in one place, so a caller can see what to
# catch. The docstring above is the tree, one class per line: a test compares
# it with the classes below, so keep the two in step.

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from memory_core.safety.finding import Finding


class MemoryCoreError(Exception):
    """Root of every error raised by memory_core."""


class PersonErasedError(MemoryCoreError):
    """A write about a person erased after the writing work began (see `fence`)."""


class AtomicWriteError(MemoryCoreError):
    """The file could not be written; the previous content is untouched."""


class DocumentError(MemoryCoreError):
    """A small document (`memory_core.documents`) could not be read, locked or written;
    the message names it by its label and says why."""


class InvalidEntryError(MemoryCoreError):
    """Content that cannot be stored as one entry (empty, or holding a delimiter line)."""


class InvalidUserKeyError(MemoryCoreError):
    """A platform, user id or user key that cannot name a user's folder."""


class UnsafeContentError(MemoryCoreError):
    """Content was refused by the safety scan; `.finding` says why."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(
            f"Blocked: content matches threat pattern '{finding.pattern_id}' ({finding.category})"
        )
        self.finding = finding


# File memory (memory_core.file_memory).


class MemoryFileError(MemoryCoreError):
    """A memory file could not be read or written; it was left as it was."""


class UnreadableMemoryError(MemoryFileError):
    """The file on disk is not valid UTF-8 (or cannot be read at all)."""


class UndecodableMemoryError(UnreadableMemoryError):
    """The file holds bytes that are not UTF-8."""


class MemoryDriftError(MemoryFileError):
    """The file was edited outside the tool and no longer round-trips; `backup` holds a copy."""

    def __init__(self, message: str, backup: Path) -> None:
        super().__init__(message)
        self.backup = backup


class MemoryLockError(MemoryFileError):
    """The file's lock could not be taken (busy, or the lock file is unsafe)."""


class MemoryEditError(MemoryCoreError):
    """An edit was refused. `entries` and `limit` describe the store as it was."""

    def __init__(self, message: str, entries: Sequence[str] = (), limit: int = 0) -> None:
        super().__init__(message)
        self.entries = tuple(entries)
        self.limit = limit


class MissingOldTextError(MemoryEditError):
    """replace or remove without `old_text`."""


class NoMatchError(MemoryEditError):
    """No entry contains `old_text`."""


class AmbiguousMatchError(MemoryEditError):
    """Several different entries contain `old_text`; `candidates` holds previews."""

    def __init__(
        self, message: str, candidates: Sequence[str], entries: Sequence[str], limit: int
    ) -> None:
        super().__init__(message, entries, limit)
        self.candidates = tuple(candidates)


class EntryTooLongError(MemoryEditError):
    """One entry is longer than the whole store's budget."""


class OverBudgetError(MemoryEditError):
    """The final state would exceed the budget; `chars_after` is what it would be."""

    def __init__(self, message: str, chars_after: int, entries: Sequence[str], limit: int) -> None:
        super().__init__(message, entries, limit)
        self.chars_after = chars_after


class UndoRefusedError(MemoryEditError):
    """An undo that cannot be done; the message is the one line the person sees.

    `template` is that line's constant (`memory_core.file_memory.ledger.UNDO_REFUSALS`)
    before `values` fill it, so that a caller can show it in the person's language."""

    def __init__(self, template: str, **values: object) -> None:
        super().__init__(template.format(**values) if values else template)
        self.template = template
        self.values = values


class BatchRejectedError(MemoryCoreError):
    """One operation of a batch was refused, so none was applied; `cause` says why."""

    def __init__(self, index: int, count: int, action: str, cause: MemoryCoreError) -> None:
        super().__init__(
            f"operation {index + 1} of {count} ({action}) refused: {cause}; nothing was changed"
        )
        self.index = index
        self.count = count
        self.cause = cause


class InvalidArgumentsError(MemoryCoreError):
    """The tool call's arguments are malformed."""


class MemoryPermissionError(MemoryCoreError):
    """The caller may not write this target."""


class StagingLimitError(MemoryCoreError):
    """No more changes may wait for this person: flagged background entries today, or
    any change while `MAX_WAITING` already wait."""


# Session store (memory_core.sessions).


class SessionStoreError(MemoryCoreError):
    """Root of the session store's errors."""


class SchemaVersionError(SessionStoreError):
    """The database was written by a newer version of Mnemo."""


class IndexIntegrityError(SessionStoreError):
    """The database or one of its full-text indexes failed its integrity check."""


class InvalidMessageError(SessionStoreError):
    """A message or session field is missing or not acceptable."""


class SessionNotFoundError(SessionStoreError):
    """No session has the given id."""


class SessionConflictError(SessionStoreError):
    """The write contradicts what is stored (another owner, an open session in the way)."""


class SessionStoreBusyError(SessionStoreError):
    """state.db stayed locked (an import, another process) longer than the caller may wait.

    Raised by the async store when a write is still queued after its wait bound:
    the write itself is kept and stored once the lock frees.
    """


class ReadTimeoutError(SessionStoreError):
    """A read of state.db (a search, most often) ran past the store's limit and was stopped."""


class ImportFormatError(SessionStoreError):
    """A line of an import file is not a valid message; `line` is its 1-based number."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line
        self.problem = problem


# PostgreSQL (memory_core.pg).


class PostgresError(MemoryCoreError):
    """Root of the PostgreSQL backend's errors."""


class PostgresUnavailableError(PostgresError):
    """The server could not be reached (or gave no connection) within the time allowed."""


class PostgresSchemaError(PostgresError):
    """The database's recorded schema is not this code's.

    A step it recorded differs from this code's step of the same version (a
    migration was edited after it ran), or it is at a newer version than this
    code knows (written by a newer Mnemo).
    """


class PostgresConflictError(PostgresError):
    """A transaction failed with a serialization failure or a deadlock on every attempt."""


# Skills (memory_core.skills).


class SkillError(MemoryCoreError):
    """Root of every skills error; the message is safe to show to the model."""


class SkillFormatError(SkillError):
    """A SKILL.md (or a name, category or path) breaks the format rules."""


class SkillPathError(SkillFormatError):
    """A support-file path is not allowed (traversal, absolute, outside the folder)."""


class SkillSizeError(SkillError):
    """Content is over one of the size limits."""


class SkillPatchError(SkillError):
    """`old_string` was not found, or matched several places without `replace_all`."""


class SkillArgumentError(SkillError):
    """A tool call's arguments are missing or of the wrong type."""


class SkillNotFoundError(SkillError):
    """No valid skill (or support file) by that name."""


class SkillExistsError(SkillError):
    """A skill or folder of that name already exists."""


class SkillProtectedError(SkillError):
    """The change is not allowed: the skill is shared, or the caller may not do it."""


class SkillQuotaError(SkillError):
    """One turn may write only so many skill files and bytes; this write would pass that."""


class SkillManifestError(SkillError):
    """The authorship manifest cannot be read, parsed or locked."""


class SkillStorageError(SkillError):
    """The filesystem refused a change (a folder could not be made, renamed or removed)."""


# Memory providers (memory_core.providers).


class ProviderError(MemoryCoreError):
    """A provider could not be found, registered, created or called."""

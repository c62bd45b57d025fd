"""Person records: small named texts kept with a person's USER.md and erased with it.

Staged changes (``USER.pending.json``) and a person's settings (``settings.json``)
are records. A memory store hands one out with `person_record(user_key, name)`,
a context manager that holds the person's write lock (the USER.md lock on
files, the person's row lock in one transaction on PostgreSQL) and checks the
erasure fence as a write does, so a read-modify-write of a record is atomic
and refused once the person is erased. `peek_record` reads one without a lock.

On files a record is the file of that name in the person's folder, written
atomically with mode 0600, so data directories written before records existed
read the same. A record's name is a plain file name ending in ``.json``: it can
never name USER.md, its ledger (``.jsonl``), its lock or a backup.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from memory_core.atomic import atomic_write_text
from memory_core.errors import MemoryFileError, UnreadableMemoryError

RECORD_MODE = 0o600
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*\.json")


class PersonRecord(Protocol):
    """One record of one person, valid while its `person_record` block runs."""

    def read(self) -> str | None:
        """The record's text; None when there is none."""
        ...

    def write(self, text: str) -> None:
        """Replace the record's text (it is kept when the block ends without error)."""
        ...

    def delete(self) -> None:
        """Remove the record (nothing happens when there is none)."""
        ...


def check_record_name(name: str) -> str:
    """`name` if it may name a record, else `MemoryFileError`."""
    if not _NAME.fullmatch(name):
        raise MemoryFileError(f"invalid record name {name!r}: expected a file name ending in .json")
    return name


def is_record_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def read_record_file(path: Path) -> str | None:
    """The text of the record file `path`; None when it is missing."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not valid UTF-8"
        raise UnreadableMemoryError(f"cannot read {path.name}: {why or exc}") from exc


class FileRecord:
    """A record as the file `path` (the caller holds the person's lock)."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def read(self) -> str | None:
        return read_record_file(self._path)

    def write(self, text: str) -> None:
        atomic_write_text(self._path, text, mode=RECORD_MODE)

    def delete(self) -> None:
        self._path.unlink(missing_ok=True)

"""Small named documents that several processes read and change: a file, or a row.

A `Document` is one text (a JSON list, say) that a process reads often and
changes now and then, while another process may change it too:

    if doc.signature() != seen:        # cheap: one stat, or one indexed row read
        text = doc.read()              # None: nothing was ever written
    with doc.changing() as handle:     # exclusive until the block ends
        handle.write(edit(handle.read()))

`FileDocument` is a file under the data directory (the embedded default): its
signature is the file's (mtime_ns, size, inode), a change holds ``<path>.lock``
(waiting up to `lock_timeout` seconds) and writes atomically, 0600.
`memory_core.pg.documents.PgDocument` is a row of the ``documents`` table, for
replicas on one PostgreSQL; `Storage.document(name)` gives the one of the
backend in use. Every failure is a `DocumentError` naming the document by its
`label`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

from filelock import FileLock, Timeout

from memory_core.atomic import atomic_write_text
from memory_core.errors import AtomicWriteError, DocumentError

Signature = tuple[int, ...]
"""What changes whenever the document does: compared, never interpreted."""


def locked_message(label: str) -> str:
    """The line of a change that waited its whole timeout for another process's."""
    return f"{label} is locked by another process; try again in a moment"


class DocumentHandle(Protocol):
    """The document while a change holds it: read it, then write it (or not)."""

    def read(self) -> str | None: ...

    def write(self, text: str) -> None: ...


class Document(Protocol):
    """One named text shared by every process of the deployment."""

    @property
    def label(self) -> str:
        """Where it is, for messages: a path, or ``postgresql:documents/NAME``."""
        ...

    def signature(self) -> Signature | None:
        """Cheap, and different after every change (None: no document yet)."""
        ...

    def read(self) -> str | None:
        """The text as it is now (None: no document yet)."""
        ...

    def changing(self) -> AbstractContextManager[DocumentHandle]:
        """The document held against every other change until the block ends; what the
        handle wrote is kept when the block ends without an error."""
        ...


class FileDocument:
    """A file (0600) changed under ``<path>.lock`` and replaced atomically."""

    def __init__(self, path: Path, lock_timeout: float = 5.0) -> None:
        self.path = path
        self._lock = FileLock(str(path.with_name(path.name + ".lock")), timeout=lock_timeout)

    @property
    def label(self) -> str:
        return str(self.path)

    def signature(self) -> Signature | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise DocumentError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def read(self) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise DocumentError(f"cannot read {self.path}: {exc}") from exc

    @contextmanager
    def changing(self) -> Iterator[DocumentHandle]:
        try:
            self._lock.acquire()
        except Timeout:
            raise DocumentError(locked_message(self.label)) from None
        try:
            yield _FileHandle(self)
        finally:
            self._lock.release()

    def _write(self, text: str) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, text, mode=0o600)
        except OSError as exc:
            raise DocumentError(f"cannot write {self.path}: {exc.strerror or exc}") from exc
        except AtomicWriteError as exc:
            raise DocumentError(str(exc)) from exc


def file_documents(home: Path) -> Callable[[str], Document]:
    """The documents of the data directory `home`: ``home/NAME``."""

    def document(name: str) -> Document:
        return FileDocument(home / name)

    return document


class _FileHandle:
    def __init__(self, document: FileDocument) -> None:
        self._document = document

    def read(self) -> str | None:
        return self._document.read()

    def write(self, text: str) -> None:
        self._document._write(text)

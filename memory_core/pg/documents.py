"""Small named documents on PostgreSQL: one row each, for every replica ("documents").

`documents(name, body, version)` holds one row per document (`body` NULL: the
row exists but nothing was written yet). Every write draws `version` from the
sequence `document_versions` (which never repeats a value), so a reader's
`signature` is one indexed read of that number. A change is one transaction:
the row is created if it is missing (``ON CONFLICT DO NOTHING``: two replicas'
first writes serialize on the key too), then locked and read ``FOR UPDATE``, so a second
change waits for the first to commit and then reads what it wrote. The wait is
bounded by `lock_timeout`, as the file's lock is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pg_errors

from memory_core.documents import Document, DocumentHandle, Signature, locked_message
from memory_core.errors import DocumentError, PostgresError
from memory_core.pg.blocking import PgSyncDatabase, SyncConnection
from memory_core.pg.migrations import PgMigration

COMPONENT = "documents"

_V1 = """
CREATE SEQUENCE document_versions;
CREATE TABLE documents (
    name TEXT PRIMARY KEY,
    body TEXT,
    version BIGINT NOT NULL DEFAULT 0
);
"""

DOCUMENT_MIGRATIONS: tuple[PgMigration, ...] = (PgMigration(COMPONENT, 1, _V1),)

_VERSION = "SELECT version FROM documents WHERE name = %s"
_BODY = "SELECT body FROM documents WHERE name = %s"
_CREATE = "INSERT INTO documents (name) VALUES (%s) ON CONFLICT (name) DO NOTHING"
_HOLD = "SELECT body FROM documents WHERE name = %s FOR UPDATE"
_WRITE = "UPDATE documents SET body = %s, version = nextval('document_versions') WHERE name = %s"


class PgDocument:
    """The document `name` in the ``documents`` table of `db`."""

    def __init__(self, db: PgSyncDatabase, name: str, lock_timeout: float = 5.0) -> None:
        self._db = db
        self.name = name
        self._lock_ms = max(1, round(lock_timeout * 1000))

    @property
    def label(self) -> str:
        return f"postgresql:documents/{self.name}"

    def signature(self) -> Signature | None:
        try:
            with self._db.connection() as conn:
                row = conn.execute(_VERSION, (self.name,)).fetchone()
        except (psycopg.Error, PostgresError) as err:
            raise self._failed("read", err) from err
        return None if row is None else (int(row[0]),)

    def read(self) -> str | None:
        try:
            with self._db.connection() as conn:
                row = conn.execute(_BODY, (self.name,)).fetchone()
        except (psycopg.Error, PostgresError) as err:
            raise self._failed("read", err) from err
        return None if row is None else row[0]

    @contextmanager
    def changing(self) -> Iterator[DocumentHandle]:
        try:
            with self._db.transaction() as conn:
                conn.execute(f"SET LOCAL lock_timeout = {self._lock_ms}")
                conn.execute(_CREATE, (self.name,))
                row = conn.execute(_HOLD, (self.name,)).fetchone()
                yield _RowHandle(conn, self.name, None if row is None else row[0])
        except pg_errors.LockNotAvailable:
            raise DocumentError(locked_message(self.label)) from None
        except (psycopg.Error, PostgresError) as err:
            raise self._failed("change", err) from err

    def _failed(self, doing: str, err: Exception) -> DocumentError:
        text = str(err).strip()
        reason = text.splitlines()[0] if text else type(err).__name__
        return DocumentError(f"cannot {doing} {self.label}: {reason}")


def pg_documents(db: PgSyncDatabase) -> Callable[[str], Document]:
    """The documents of the database `db`, by name."""

    def document(name: str) -> Document:
        return PgDocument(db, name)

    return document


class _RowHandle:
    """The row, held FOR UPDATE by the change's transaction."""

    def __init__(self, conn: SyncConnection, name: str, body: str | None) -> None:
        self._conn = conn
        self._name = name
        self._body = body

    def read(self) -> str | None:
        return self._body

    def write(self, text: str) -> None:
        self._conn.execute(_WRITE, (text, self._name))
        self._body = text

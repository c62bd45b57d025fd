"""The rows of the memory tables: reading and writing them on one connection.

`PgMemoryStore` calls these inside its transactions, after locking the file's
`memory_versions` row; they take no lock of their own. `MemoryFile` names one
file: ('memory', '') or ('user', a checked user key).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.errors import InvalidUserKeyError, MemoryFileError
from memory_core.file_memory.forgetting import ForgetPlan
from memory_core.file_memory.ledger import (
    ARCHIVE_LIMIT,
    HISTORY_LIMIT,
    HISTORY_SLACK,
    ArchivedEntry,
    Draft,
    EntryOrigin,
    LedgerChange,
    made_changes,
)
from memory_core.file_memory.origin import Evidence, Origin, evidence_from_json, evidence_json
from memory_core.file_memory.store import TARGETS, Target
from memory_core.pg.blocking import SyncConnection as Connection
from memory_core.user_keys import check_user_key

ENTRY_COLUMNS = "text, origin_kind, origin_session, origin_by, created_at, evidence"
CHANGE_COLUMNS = (
    "id, at, action, before, after, origin_kind, origin_session, origin_by, undoes,"
    " evidence, before_evidence"
)
ARCHIVE_COLUMNS = "text, origin_kind, origin_session, origin_by, at, change_id, evidence"


@dataclass(frozen=True)
class MemoryFile:
    """One memory file's key: ('memory', '') or ('user', a checked user key)."""

    target: Target
    user_key: str

    @property
    def person(self) -> str | None:
        return self.user_key if self.target == "user" else None

    @property
    def key(self) -> tuple[str, str]:
        return (self.target, self.user_key)


def file_of(target: str, user_key: str | None) -> MemoryFile:
    if target not in TARGETS:
        raise MemoryFileError(f"unknown target {target!r}: use 'memory' or 'user'")
    if target == "memory":
        return MemoryFile("memory", "")
    if user_key is None:
        raise InvalidUserKeyError("the user target needs a user key")
    return MemoryFile("user", check_user_key(user_key))


def origin_of(kind: Any, session_id: Any, by: Any) -> Origin:
    return Origin.from_json({"kind": kind, "session_id": session_id, "by": by})


def evidence_of(value: Any) -> tuple[Evidence, ...]:
    """A jsonb evidence column (psycopg gives the list; a text one is parsed)."""
    return evidence_from_json(json.loads(value) if isinstance(value, str) else value)


def evidence_value(evidence: tuple[Evidence, ...]) -> str:
    """Evidence as the JSON text a ``%s::jsonb`` parameter takes."""
    return json.dumps(evidence_json(evidence), ensure_ascii=False)


def change_of(row: Sequence[Any]) -> LedgerChange:
    change_id, at, action, before, after, kind, session_id, by, undoes, evidence, prior = row
    origin = origin_of(kind, session_id, by)
    return LedgerChange(
        int(change_id), float(at), action, before, after, origin, undoes,
        evidence_of(evidence), evidence_of(prior),
    )  # fmt: skip


def read_entries(conn: Connection, file: MemoryFile) -> list[EntryOrigin]:
    cur = conn.execute(
        f"SELECT {ENTRY_COLUMNS} FROM memory_entries"
        " WHERE target = %s AND user_key = %s ORDER BY position",
        file.key,
    )
    return [
        EntryOrigin(text, origin_of(kind, session_id, by), at, evidence_of(evidence))
        for text, kind, session_id, by, at, evidence in cur.fetchall()
    ]


def read_all_changes(conn: Connection, file: MemoryFile) -> list[LedgerChange]:
    cur = conn.execute(
        f"SELECT {CHANGE_COLUMNS} FROM memory_history"
        " WHERE target = %s AND user_key = %s ORDER BY id",
        file.key,
    )
    return [change_of(row) for row in cur.fetchall()]


def read_archive(conn: Connection, file: MemoryFile) -> list[ArchivedEntry]:
    cur = conn.execute(
        f"SELECT {ARCHIVE_COLUMNS} FROM memory_archive"
        " WHERE target = %s AND user_key = %s ORDER BY change_id",
        file.key,
    )
    return [
        ArchivedEntry(
            text, origin_of(kind, session_id, by), float(at), int(change_id),
            evidence_of(evidence),
        )
        for text, kind, session_id, by, at, change_id, evidence in cur.fetchall()
    ]  # fmt: skip


def record_changes(
    conn: Connection, file: MemoryFile, drafts: Sequence[Draft], origin: Origin
) -> list[LedgerChange]:
    """Append `drafts` to `file`'s history as made by `origin` now, trimming it back to
    `HISTORY_LIMIT` once it holds `HISTORY_SLACK` more; the changes as recorded."""
    if not drafts:
        return []
    cur = conn.execute(
        "SELECT coalesce(max(id), 0), count(*) FROM memory_history"
        " WHERE target = %s AND user_key = %s",
        file.key,
    )
    row = cur.fetchone()
    assert row is not None
    last, count = int(row[0]), int(row[1])
    at = time.time()
    made = made_changes(drafts, origin, last + 1, at)
    insert_changes(conn, file, made)
    if count + len(made) > HISTORY_LIMIT + HISTORY_SLACK:
        conn.execute(
            "DELETE FROM memory_history WHERE target = %s AND user_key = %s AND id <= %s",
            (*file.key, made[-1].id - HISTORY_LIMIT),
        )
    return made


def insert_changes(conn: Connection, file: MemoryFile, changes: Sequence[LedgerChange]) -> None:
    """Add `changes` to `file`'s history as they are (ids, times and writers kept)."""
    with conn.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO memory_history (target, user_key, {CHANGE_COLUMNS})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb)",
            [
                (
                    *file.key,
                    c.id,
                    c.at,
                    c.action,
                    c.before,
                    c.after,
                    *origin_row(c.origin),
                    c.undoes,
                    evidence_value(c.evidence),
                    evidence_value(c.before_evidence),
                )
                for c in changes
            ],
        )


def write_entries(
    conn: Connection, file: MemoryFile, old: Sequence[EntryOrigin], new: Sequence[EntryOrigin]
) -> None:
    """Make `file`'s rows `new`, rewriting only the positions from the first difference."""
    same = 0
    while same < min(len(old), len(new)) and old[same] == new[same]:
        same += 1
    conn.execute(
        "DELETE FROM memory_entries WHERE target = %s AND user_key = %s AND position >= %s",
        (*file.key, same),
    )
    if same == len(new):
        return
    with conn.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO memory_entries (target, user_key, position, {ENTRY_COLUMNS})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb)",
            [
                (
                    *file.key,
                    position,
                    e.text,
                    *origin_row(e.origin),
                    e.at,
                    evidence_value(e.evidence),
                )
                for position, e in enumerate(new[same:], start=same)
            ],
        )


def add_archive(conn: Connection, file: MemoryFile, archived: Sequence[ArchivedEntry]) -> None:
    """Add `archived` to `file`'s archive, keeping its last `ARCHIVE_LIMIT` entries."""
    if not archived:
        return
    with conn.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO memory_archive (target, user_key, {ARCHIVE_COLUMNS})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb)",
            [
                (
                    *file.key,
                    a.text,
                    *origin_row(a.origin),
                    a.at,
                    a.change_id,
                    evidence_value(a.evidence),
                )
                for a in archived
            ],
        )
    conn.execute(
        "DELETE FROM memory_archive WHERE target = %s AND user_key = %s AND change_id NOT IN"
        " (SELECT change_id FROM memory_archive WHERE target = %s AND user_key = %s"
        "  ORDER BY change_id DESC LIMIT %s)",
        (*file.key, *file.key, ARCHIVE_LIMIT),
    )


def forget_rows(
    conn: Connection, file: MemoryFile, plan: ForgetPlan, archive: Sequence[ArchivedEntry]
) -> None:
    """Make `file`'s archive and history rows what `plan` leaves (see `forgetting`): the
    forgotten texts' archive rows deleted, their history rows kept without text or evidence,
    other rows without evidence naming a forgotten message."""
    conn.execute(
        "DELETE FROM memory_archive WHERE target = %s AND user_key = %s AND text = ANY(%s)",
        (*file.key, sorted(plan.versions)),
    )
    kept = {a.change_id: a for a in plan.archive}
    for item in archive:
        if item.change_id in kept and kept[item.change_id] != item:
            conn.execute(
                "UPDATE memory_archive SET evidence = %s::jsonb"
                " WHERE target = %s AND user_key = %s AND change_id = %s",
                (evidence_value(kept[item.change_id].evidence), *file.key, item.change_id),
            )
    lines = {c.id: c for c in plan.history}
    for change_id in (*plan.scrubbed, *plan.retouched):
        line = lines[change_id]
        conn.execute(
            "UPDATE memory_history SET action = %s, before = %s, after = %s,"
            " evidence = %s::jsonb, before_evidence = %s::jsonb"
            " WHERE target = %s AND user_key = %s AND id = %s",
            (
                line.action,
                line.before,
                line.after,
                evidence_value(line.evidence),
                evidence_value(line.before_evidence),
                *file.key,
                line.id,
            ),
        )


def bump(conn: Connection, file: MemoryFile) -> None:
    conn.execute(
        "UPDATE memory_versions SET version = version + 1 WHERE target = %s AND user_key = %s",
        file.key,
    )


def origin_row(origin: Origin) -> tuple[str, int | None, str | None]:
    return (origin.kind, origin.session_id, origin.by)

"""MEMORY.md and USER.md as PostgreSQL rows, with `FileMemoryStore`'s semantics.

`PgMemoryStore` reads and writes the tables of `memory_schema`. Each write is one
transaction (`PgDatabase.transact`) that locks the file's `memory_versions` row
`FOR UPDATE` (so writers of one file run one after the other, on any machine),
checks the erasure fence under that lock, reads the entries, applies the
operations with the same pure code as the file store (`apply_operations`,
`fit_by_archiving`, `pick_undo`, `undo_outcome`), so the same input gives the same
state or the same error and the budget holds at every commit, then writes the
changed rows, the history rows and the new version. Readers take no lock: they
see the last committed state.

Differences from the files, by design: nothing can be edited by hand, so there is
no drift check or backup; an entry keeps its writer on its row, so trimming the
history (to `HISTORY_LIMIT` changes) never turns an entry into the operator's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.errors import (
    InvalidUserKeyError,
    MemoryFileError,
    OverBudgetError,
    PostgresConflictError,
    UndoRefusedError,
)
from memory_core.fence import ErasureFence
from memory_core.file_memory.edits import EditOutcome, Operation, apply_operations
from memory_core.file_memory.entries import usage
from memory_core.file_memory.ledger import (
    ARCHIVE_LIMIT,
    ARCHIVE_LOST,
    HISTORY_LIMIT,
    HISTORY_SLACK,
    NOTHING_TO_UNDO,
    ArchivedEntry,
    Draft,
    EntryOrigin,
    LedgerChange,
    entry_origins,
    fit_by_archiving,
    pick_undo,
    undo_outcome,
)
from memory_core.file_memory.origin import OPERATOR, Origin
from memory_core.file_memory.render import (
    MEMORY_TITLE,
    USER_TITLE,
    MemorySnapshot,
    render_block,
)
from memory_core.file_memory.store import (
    TARGETS,
    MemoryState,
    Target,
    UndoResult,
    WriteResult,
)
from memory_core.pg.database import Connection, PgDatabase
from memory_core.user_keys import check_user_key

_LOCK_TRIES = 3  # a file's row deleted by an erasure between our insert and our lock

_ENTRY_COLUMNS = "text, origin_kind, origin_session, origin_by, created_at"
_CHANGE_COLUMNS = "id, at, action, before, after, origin_kind, origin_session, origin_by, undoes"
_ARCHIVE_COLUMNS = "text, origin_kind, origin_session, origin_by, at, change_id"


@dataclass(frozen=True)
class _File:
    """One memory file's key: ('memory', '') or ('user', a checked user key)."""

    target: Target
    user_key: str

    @property
    def person(self) -> str | None:
        return self.user_key if self.target == "user" else None

    @property
    def key(self) -> tuple[str, str]:
        return (self.target, self.user_key)


@dataclass(frozen=True)
class _Written:
    """What one write did, carried out of its transaction."""

    outcome: EditOutcome
    moved: tuple[str, ...] = ()
    undone: LedgerChange | None = None
    made: tuple[LedgerChange, ...] = ()


class PgMemoryStore:
    """MEMORY.md and the USER.md of every person, in one PostgreSQL database."""

    def __init__(
        self,
        db: PgDatabase,
        *,
        memory_char_limit: int = 2200,
        user_char_limit: int = 1375,
        fence: ErasureFence | None = None,
    ) -> None:
        """`db`: an open `PgDatabase` migrated with `MEMORY_MIGRATIONS`; `fence`: the
        erasures a write about a person is checked against (share one per process)."""
        self._db = db
        self.fence = fence if fence is not None else ErasureFence()
        self._limits: dict[Target, int] = {"memory": memory_char_limit, "user": user_char_limit}

    def limit(self, target: Target) -> int:
        """The budget of `target` in characters."""
        if target not in TARGETS:
            raise MemoryFileError(f"unknown target {target!r}: use 'memory' or 'user'")
        return self._limits[target]

    async def read(self, target: Target, user_key: str | None = None) -> MemoryState:
        """The live entries of `target` (a file never written has none)."""
        file = _file(target, user_key)
        async with self._db.connection() as conn:
            rows = await _entries(conn, file)
        return self._state(file.target, [o.text for o in rows])

    async def origins(self, target: Target, user_key: str | None = None) -> list[EntryOrigin]:
        """The live entries of `target`, each with who wrote it and when."""
        async with self._db.connection() as conn:
            return await _entries(conn, _file(target, user_key))

    async def history(
        self, target: Target, user_key: str | None = None, limit: int | None = 20
    ) -> tuple[LedgerChange, ...]:
        """The latest `limit` changes of `target` (None: all it keeps), newest first."""
        if limit is not None and limit <= 0:
            return ()
        file = _file(target, user_key)
        async with self._db.connection() as conn:
            cur = await conn.execute(
                f"SELECT {_CHANGE_COLUMNS} FROM memory_history"
                " WHERE target = %s AND user_key = %s ORDER BY id DESC LIMIT %s",
                (*file.key, limit),
            )
            return tuple(_change(row) for row in await cur.fetchall())

    async def archived(self, user_key: str) -> list[ArchivedEntry]:
        """The entries moved out of `user_key`'s full USER.md, oldest first."""
        async with self._db.connection() as conn:
            return await _archive(conn, _file("user", user_key))

    async def snapshot(self, user_key: str | None, include_profile: bool) -> MemorySnapshot:
        """Render the prompt blocks once: MEMORY.md, and the user's USER.md if asked."""
        memory = await self.read("memory")
        user_block = ""
        if include_profile and user_key is not None:
            profile = await self.read("user", user_key)
            user_block = render_block(USER_TITLE, profile.entries, profile.limit)
        return MemorySnapshot(render_block(MEMORY_TITLE, memory.entries, memory.limit), user_block)

    async def apply(
        self,
        target: Target,
        user_key: str | None,
        operations: Sequence[Operation],
        origin: Origin = OPERATOR,
    ) -> WriteResult:
        """Apply `operations` all-or-nothing in one transaction, recording each entry
        change as made by `origin`; a full USER.md first moves the oldest entries the
        person did not write to its archive, as `FileMemoryStore.apply` does."""
        if not operations:
            raise MemoryFileError("no operations given")
        file = _file(target, user_key)
        limit = self.limit(file.target)
        if file.person is not None:
            self.fence.check(file.person)

        async def work(conn: Connection) -> _Written:
            await self._lock(conn, file)
            rows = await _entries(conn, file)
            entries = [r.text for r in rows]
            moved: list[EntryOrigin] = []
            try:
                outcome = apply_operations(entries, operations, limit)
            except OverBudgetError as full:
                if file.target != "user":
                    raise
                outcome, moved = fit_by_archiving(
                    entries, operations, limit, _as_changes(rows), full
                )
            if not outcome.changed:
                return _Written(outcome)
            drafts = [Draft("archive", m.text, None) for m in moved]
            drafts += [Draft(c.action, c.before, c.after) for c in outcome.changes]
            made = await _record(conn, file, drafts, origin)
            await _bump(conn, file)
            writers = {r.text: r for r in rows}
            for change in made:
                if change.after is not None:
                    writers[change.after] = EntryOrigin(change.after, origin, change.at)
            await _write_entries(conn, file, rows, [writers[e] for e in outcome.entries])
            archived = [
                ArchivedEntry(m.text, m.origin, c.at, c.id)
                for m, c in zip(moved, made, strict=False)
            ]
            await _add_archive(conn, file, archived)
            return _Written(outcome, tuple(m.text for m in moved))

        written = await self._db.transact(work)
        state = self._state(file.target, written.outcome.entries)
        return WriteResult(state, written.outcome.changed, written.outcome.notes, written.moved)

    async def undo(
        self,
        target: Target,
        user_key: str | None,
        change_id: int | None = None,
        origin: Origin = OPERATOR,
    ) -> UndoResult:
        """Revert the latest change still in force, or change `change_id`, as a new change
        by `origin`; `UndoRefusedError` as `FileMemoryStore.undo` refuses."""
        file = _file(target, user_key)
        limit = self.limit(file.target)
        if file.person is not None:
            self.fence.check(file.person)

        async def work(conn: Connection) -> _Written:
            await self._lock(conn, file)
            changes = await _all_changes(conn, file)
            if not changes:
                raise UndoRefusedError(NOTHING_TO_UNDO)
            rows = await _entries(conn, file)
            entries = [r.text for r in rows]
            change = pick_undo(changes, change_id)
            archive = await _archive(conn, file) if change.action == "archive" else []
            kept = next((a for a in archive if a.change_id == change.id), None)
            if change.action == "archive" and kept is None:
                raise UndoRefusedError(ARCHIVE_LOST, change_id=change.id)
            outcome = undo_outcome(change, entries, limit)
            drafts = [Draft("undo", c.before, c.after, change.id) for c in outcome.changes]
            made = await _record(conn, file, drafts, origin)
            await _bump(conn, file)
            writers = {r.text: r for r in rows}
            for new in made:
                if new.after is not None:
                    writers[new.after] = _brought_back(new, changes, kept)
            await _write_entries(conn, file, rows, [writers[e] for e in outcome.entries])
            if kept is not None:
                await conn.execute(
                    "DELETE FROM memory_archive"
                    " WHERE target = %s AND user_key = %s AND change_id = %s",
                    (*file.key, change.id),
                )
            return _Written(outcome, undone=change, made=tuple(made))

        written = await self._db.transact(work)
        assert written.undone is not None
        state = self._state(file.target, written.outcome.entries)
        return UndoResult(
            written.undone, written.made, WriteResult(state, True, written.outcome.notes)
        )

    async def erase_user(self, user_key: str) -> bool:
        """Delete `user_key`'s USER.md (entries, history, archive) and their name as the
        writer (`by`) of any other change, in one transaction; whether they had one.

        The delete waits for a write in progress on their row; a write that then takes
        the lock finds no row and meets the fence (call `fence.erasing` first)."""
        file = _file("user", user_key)

        async def work(conn: Connection) -> bool:
            cur = await conn.execute(
                "DELETE FROM memory_versions WHERE target = %s AND user_key = %s RETURNING 1",
                file.key,
            )
            gone = await cur.fetchone() is not None
            for table in ("memory_entries", "memory_history", "memory_archive"):
                await conn.execute(
                    f"UPDATE {table} SET origin_by = NULL WHERE origin_by = %s",
                    (file.user_key,),
                )
            return gone

        return await self._db.transact(work)

    async def _lock(self, conn: Connection, file: _File) -> int:
        """Lock `file`'s version row (creating it), then check the fence; its version."""
        for _ in range(_LOCK_TRIES):
            await conn.execute(
                "INSERT INTO memory_versions (target, user_key) VALUES (%s, %s)"
                " ON CONFLICT DO NOTHING",
                file.key,
            )
            cur = await conn.execute(
                "SELECT version FROM memory_versions"
                " WHERE target = %s AND user_key = %s FOR UPDATE",
                file.key,
            )
            row = await cur.fetchone()
            if file.person is not None:
                self.fence.check(file.person)  # erased while we waited: nothing lands
            if row is not None:
                return int(row[0])
        raise PostgresConflictError(f"the {file.target} memory kept being deleted under a write")

    def _state(self, target: Target, entries: Sequence[str]) -> MemoryState:
        return MemoryState(target, tuple(entries), usage(entries), self.limit(target))


def _file(target: str, user_key: str | None) -> _File:
    if target not in TARGETS:
        raise MemoryFileError(f"unknown target {target!r}: use 'memory' or 'user'")
    if target == "memory":
        return _File("memory", "")
    if user_key is None:
        raise InvalidUserKeyError("the user target needs a user key")
    return _File("user", check_user_key(user_key))


def _origin(kind: Any, session_id: Any, by: Any) -> Origin:
    return Origin.from_json({"kind": kind, "session_id": session_id, "by": by})


def _change(row: Sequence[Any]) -> LedgerChange:
    change_id, at, action, before, after, kind, session_id, by, undoes = row
    origin = _origin(kind, session_id, by)
    return LedgerChange(int(change_id), float(at), action, before, after, origin, undoes)


def _as_changes(rows: Sequence[EntryOrigin]) -> list[LedgerChange]:
    """The entries' writers as ledger changes, for `fit_by_archiving`'s oldest-first order."""
    return [LedgerChange(0, r.at or 0.0, "add", None, r.text, r.origin) for r in rows]


def _brought_back(
    change: LedgerChange, history: Sequence[LedgerChange], kept: ArchivedEntry | None
) -> EntryOrigin:
    """Who wrote an entry an undo brings back: its first writer, as the file ledger says."""
    text = change.after or ""
    if kept is not None and kept.text == text:
        return EntryOrigin(text, kept.origin, kept.at)
    found = entry_origins([text], history)[0]
    if found.at is None:
        return EntryOrigin(text, change.origin, change.at)
    return found


async def _entries(conn: Connection, file: _File) -> list[EntryOrigin]:
    cur = await conn.execute(
        f"SELECT {_ENTRY_COLUMNS} FROM memory_entries"
        " WHERE target = %s AND user_key = %s ORDER BY position",
        file.key,
    )
    return [
        EntryOrigin(text, _origin(kind, session_id, by), at)
        for text, kind, session_id, by, at in await cur.fetchall()
    ]


async def _all_changes(conn: Connection, file: _File) -> list[LedgerChange]:
    cur = await conn.execute(
        f"SELECT {_CHANGE_COLUMNS} FROM memory_history"
        " WHERE target = %s AND user_key = %s ORDER BY id",
        file.key,
    )
    return [_change(row) for row in await cur.fetchall()]


async def _archive(conn: Connection, file: _File) -> list[ArchivedEntry]:
    cur = await conn.execute(
        f"SELECT {_ARCHIVE_COLUMNS} FROM memory_archive"
        " WHERE target = %s AND user_key = %s ORDER BY change_id",
        file.key,
    )
    return [
        ArchivedEntry(text, _origin(kind, session_id, by), float(at), int(change_id))
        for text, kind, session_id, by, at, change_id in await cur.fetchall()
    ]


async def _record(
    conn: Connection, file: _File, drafts: Sequence[Draft], origin: Origin
) -> list[LedgerChange]:
    """Append `drafts` to `file`'s history as made by `origin` now, trimming it back to
    `HISTORY_LIMIT` once it holds `HISTORY_SLACK` more; the changes as recorded."""
    if not drafts:
        return []
    cur = await conn.execute(
        "SELECT coalesce(max(id), 0), count(*) FROM memory_history"
        " WHERE target = %s AND user_key = %s",
        file.key,
    )
    row = await cur.fetchone()
    assert row is not None
    last, count = int(row[0]), int(row[1])
    at = time.time()
    made = [
        LedgerChange(last + 1 + i, at, d.action, d.before, d.after, origin, d.undoes)
        for i, d in enumerate(drafts)
    ]
    async with conn.cursor() as cursor:
        await cursor.executemany(
            f"INSERT INTO memory_history (target, user_key, {_CHANGE_COLUMNS})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    *file.key,
                    c.id,
                    c.at,
                    c.action,
                    c.before,
                    c.after,
                    *_origin_row(c.origin),
                    c.undoes,
                )
                for c in made
            ],
        )
    if count + len(made) > HISTORY_LIMIT + HISTORY_SLACK:
        await conn.execute(
            "DELETE FROM memory_history WHERE target = %s AND user_key = %s AND id <= %s",
            (*file.key, made[-1].id - HISTORY_LIMIT),
        )
    return made


async def _write_entries(
    conn: Connection, file: _File, old: Sequence[EntryOrigin], new: Sequence[EntryOrigin]
) -> None:
    """Make `file`'s rows `new`, rewriting only the positions from the first difference."""
    same = 0
    while same < min(len(old), len(new)) and old[same] == new[same]:
        same += 1
    await conn.execute(
        "DELETE FROM memory_entries WHERE target = %s AND user_key = %s AND position >= %s",
        (*file.key, same),
    )
    if same == len(new):
        return
    async with conn.cursor() as cursor:
        await cursor.executemany(
            f"INSERT INTO memory_entries (target, user_key, position, {_ENTRY_COLUMNS})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (*file.key, position, e.text, *_origin_row(e.origin), e.at)
                for position, e in enumerate(new[same:], start=same)
            ],
        )


async def _add_archive(conn: Connection, file: _File, archived: Sequence[ArchivedEntry]) -> None:
    """Add `archived` to `file`'s archive, keeping its last `ARCHIVE_LIMIT` entries."""
    if not archived:
        return
    async with conn.cursor() as cursor:
        await cursor.executemany(
            f"INSERT INTO memory_archive (target, user_key, {_ARCHIVE_COLUMNS})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [(*file.key, a.text, *_origin_row(a.origin), a.at, a.change_id) for a in archived],
        )
    await conn.execute(
        "DELETE FROM memory_archive WHERE target = %s AND user_key = %s AND change_id NOT IN"
        " (SELECT change_id FROM memory_archive WHERE target = %s AND user_key = %s"
        "  ORDER BY change_id DESC LIMIT %s)",
        (*file.key, *file.key, ARCHIVE_LIMIT),
    )


async def _bump(conn: Connection, file: _File) -> None:
    await conn.execute(
        "UPDATE memory_versions SET version = version + 1 WHERE target = %s AND user_key = %s",
        file.key,
    )


def _origin_row(origin: Origin) -> tuple[str, int | None, str | None]:
    return (origin.kind, origin.session_id, origin.by)

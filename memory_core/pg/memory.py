"""MEMORY.md and USER.md as PostgreSQL rows, with `FileMemoryStore`'s semantics.

`PgMemoryStore` reads and writes the tables of `memory_schema`. Each write is one
transaction (`PgSyncDatabase.transact`) that locks the file's `memory_versions` row
`FOR UPDATE` (so writers of one file run one after the other, on any machine),
checks the erasure fence under that lock, reads the entries, applies the
operations with the same pure code as the file store (`apply_operations`,
`fit_by_archiving`, `pick_undo`, `undo_outcome`), so the same input gives the same
state or the same error and the budget holds at every commit, then writes the
changed rows, the history rows and the new version. Readers take no lock: they
see the last committed state.

Differences from the files, by design: nothing can be edited by hand, so there is
no drift check or backup; an entry keeps its writer and evidence on its row (the
files keep them in ``USER.entries.json``), so trimming the history (to
`HISTORY_LIMIT` changes) never turns an entry into the operator's. `forget`
deletes or rewrites every row that held a forgotten entry's text (entries,
archive, history, the staged-changes record) in one transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from memory_core.errors import (
    MemoryFileError,
    OverBudgetError,
    PostgresConflictError,
    UndoRefusedError,
)
from memory_core.fence import ErasureFence, current_mark
from memory_core.file_memory.digest import Readable, content_digest
from memory_core.file_memory.edits import EditOutcome, Operation, apply_operations
from memory_core.file_memory.entries import usage
from memory_core.file_memory.entry_records import change_drafts, settled
from memory_core.file_memory.forgetting import (
    PENDING_FILE,
    ForgetResult,
    plan_forget,
    scrub_pending,
)
from memory_core.file_memory.ledger import (
    ARCHIVE_LOST,
    NOTHING_TO_UNDO,
    ArchivedEntry,
    EntryOrigin,
    LedgerChange,
    fit_by_archiving,
    pick_undo,
    undo_outcome,
)
from memory_core.file_memory.origin import OPERATOR, Origin
from memory_core.file_memory.records import PersonRecord, check_record_name
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
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.blocking import SyncConnection as Connection
from memory_core.pg.fence import check_erased_sync
from memory_core.pg.memory_rows import (
    CHANGE_COLUMNS,
    MemoryFile,
    add_archive,
    bump,
    change_of,
    file_of,
    forget_rows,
    insert_changes,
    read_all_changes,
    read_archive,
    read_entries,
    record_changes,
    write_entries,
)
from memory_core.pg.person_records import PgRecord, read_record, record_names

_LOCK_TRIES = 3  # a file's row deleted by an erasure between our insert and our lock


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
        db: PgSyncDatabase,
        *,
        memory_char_limit: int = 2200,
        user_char_limit: int = 1375,
        fence: ErasureFence | None = None,
    ) -> None:
        """`db`: an open `PgSyncDatabase` migrated with `MEMORY_MIGRATIONS`; `fence`: the
        erasures a write about a person is checked against (share one per process)."""
        self._db = db
        self.fence = fence if fence is not None else ErasureFence()
        self._limits: dict[Target, int] = {"memory": memory_char_limit, "user": user_char_limit}

    def limit(self, target: Target) -> int:
        """The budget of `target` in characters."""
        if target not in TARGETS:
            raise MemoryFileError(f"unknown target {target!r}: use 'memory' or 'user'")
        return self._limits[target]

    def read(self, target: Target, user_key: str | None = None) -> MemoryState:
        """The live entries of `target` (a file never written has none)."""
        file = file_of(target, user_key)
        with self._db.connection() as conn:
            rows = read_entries(conn, file)
        return self._state(file.target, [o.text for o in rows])

    def origins(self, target: Target, user_key: str | None = None) -> list[EntryOrigin]:
        """The live entries of `target`, each with who wrote it and when."""
        with self._db.connection() as conn:
            return read_entries(conn, file_of(target, user_key))

    def history(
        self, target: Target, user_key: str | None = None, limit: int | None = 20
    ) -> tuple[LedgerChange, ...]:
        """The latest `limit` changes of `target` (None: all it keeps), newest first."""
        if limit is not None and limit <= 0:
            return ()
        file = file_of(target, user_key)
        with self._db.connection() as conn:
            cur = conn.execute(
                f"SELECT {CHANGE_COLUMNS} FROM memory_history"
                " WHERE target = %s AND user_key = %s ORDER BY id DESC LIMIT %s",
                (*file.key, limit),
            )
            return tuple(change_of(row) for row in cur.fetchall())

    def archived(self, user_key: str) -> list[ArchivedEntry]:
        """The entries moved out of `user_key`'s full USER.md, oldest first."""
        with self._db.connection() as conn:
            return read_archive(conn, file_of("user", user_key))

    def snapshot(self, user_key: str | None, include_profile: bool) -> MemorySnapshot:
        """Render the prompt blocks once: MEMORY.md, and the user's USER.md if asked."""
        memory = self.read("memory")
        user_block = ""
        if include_profile and user_key is not None:
            profile = self.read("user", user_key)
            user_block = render_block(USER_TITLE, profile.entries, profile.limit)
        return MemorySnapshot(render_block(MEMORY_TITLE, memory.entries, memory.limit), user_block)

    def apply(
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
        file = file_of(target, user_key)
        limit = self.limit(file.target)
        if file.person is not None:
            self.fence.check(file.person)

        def work(conn: Connection) -> _Written:
            self._lock(conn, file)
            rows = read_entries(conn, file)
            entries = [r.text for r in rows]
            moved: list[EntryOrigin] = []
            try:
                outcome = apply_operations(entries, operations, limit)
            except OverBudgetError as full:
                if file.target != "user":
                    raise
                outcome, moved = fit_by_archiving(entries, operations, limit, rows, full)
            if not outcome.changed:
                return _Written(outcome)
            made = record_changes(conn, file, change_drafts(moved, outcome.changes, rows), origin)
            bump(conn, file)
            write_entries(conn, file, rows, settled(outcome.entries, rows, made))
            archived = [
                ArchivedEntry(m.text, m.origin, c.at, c.id, m.evidence)
                for m, c in zip(moved, made, strict=False)
            ]
            add_archive(conn, file, archived)
            return _Written(outcome, tuple(m.text for m in moved))

        written = self._db.transact(work)
        state = self._state(file.target, written.outcome.entries)
        return WriteResult(state, written.outcome.changed, written.outcome.notes, written.moved)

    def undo(
        self,
        target: Target,
        user_key: str | None,
        change_id: int | None = None,
        origin: Origin = OPERATOR,
    ) -> UndoResult:
        """Revert the latest change still in force, or change `change_id`, as a new change
        by `origin`; `UndoRefusedError` as `FileMemoryStore.undo` refuses."""
        file = file_of(target, user_key)
        limit = self.limit(file.target)
        if file.person is not None:
            self.fence.check(file.person)

        def work(conn: Connection) -> _Written:
            self._lock(conn, file)
            changes = read_all_changes(conn, file)
            if not changes:
                raise UndoRefusedError(NOTHING_TO_UNDO)
            rows = read_entries(conn, file)
            entries = [r.text for r in rows]
            change = pick_undo(changes, change_id)
            archive = read_archive(conn, file) if change.action == "archive" else []
            kept = next((a for a in archive if a.change_id == change.id), None)
            if change.action == "archive" and kept is None:
                raise UndoRefusedError(ARCHIVE_LOST, change_id=change.id)
            outcome = undo_outcome(change, entries, limit)
            drafts = change_drafts((), outcome.changes, rows, undoes=change.id)
            made = record_changes(conn, file, drafts, origin)
            bump(conn, file)
            write_entries(conn, file, rows, settled(outcome.entries, rows, made, changes, kept))
            if kept is not None:
                conn.execute(
                    "DELETE FROM memory_archive"
                    " WHERE target = %s AND user_key = %s AND change_id = %s",
                    (*file.key, change.id),
                )
            return _Written(outcome, undone=change, made=tuple(made))

        written = self._db.transact(work)
        assert written.undone is not None
        state = self._state(file.target, written.outcome.entries)
        return UndoResult(
            written.undone, written.made, WriteResult(state, True, written.outcome.notes)
        )

    def forget(
        self, user_key: str, texts: Sequence[str], origin: Origin = OPERATOR
    ) -> ForgetResult:
        """Remove each of `texts` that is an entry of `user_key`'s USER.md or archive, for good,
        in one transaction: their rows go, every history row that held one of their texts
        keeps only its id, time and writer ("forgotten"), their staged changes go; the
        history gains a "forget" row per entry, by `origin`, that no undo reverts."""
        file = file_of("user", user_key)
        self.fence.check(file.user_key)

        def work(conn: Connection) -> ForgetResult:
            held = conn.execute(
                "SELECT 1 FROM memory_versions WHERE target = %s AND user_key = %s", file.key
            ).fetchone()
            if held is None:
                return ForgetResult((), ())  # nothing held: no row is made for nothing
            self._lock(conn, file)
            rows = read_entries(conn, file)
            history = read_all_changes(conn, file)
            archive = read_archive(conn, file)
            plan = plan_forget(texts, rows, archive, history)
            if not plan.forgotten:
                return plan.result()
            write_entries(conn, file, rows, plan.records)
            forget_rows(conn, file, plan, archive)
            record_changes(conn, file, plan.drafts, origin)
            record = PgRecord(conn, file.user_key, PENDING_FILE)
            scrubbed = scrub_pending(record.read(), plan.versions, plan.message_ids)
            if scrubbed is not None:
                record.write(scrubbed)
            bump(conn, file)
            return plan.result()

        return self._db.transact(work)

    def erase_user(self, user_key: str) -> bool:
        """Delete `user_key`'s USER.md (entries, history, archive), their records and their
        name as the writer (`by`) of any other change, in one transaction; whether there
        was anything of theirs.

        The delete waits for a write in progress on their row; a write that then takes
        the lock finds no row and meets the fence (call `fence.erasing` first)."""
        file = file_of("user", user_key)

        def work(conn: Connection) -> bool:
            cur = conn.execute(
                "DELETE FROM memory_versions WHERE target = %s AND user_key = %s RETURNING 1",
                file.key,
            )
            gone = cur.fetchone() is not None
            cur = conn.execute(
                "DELETE FROM person_records WHERE user_key = %s RETURNING 1", (file.user_key,)
            )
            gone = cur.fetchone() is not None or gone
            for table in ("memory_entries", "memory_history", "memory_archive"):
                conn.execute(
                    f"UPDATE {table} SET origin_by = NULL WHERE origin_by = %s",
                    (file.user_key,),
                )
            return gone

        return self._db.transact(work)

    @contextmanager
    def person_record(self, user_key: str, name: str) -> Iterator[PersonRecord]:
        """`user_key`'s record `name`, in one transaction holding their USER.md row lock
        (committed when the block ends, rolled back when it raises); an erased person
        is refused as for a write."""
        file = file_of("user", user_key)
        check_record_name(name)
        self.fence.check(file.user_key)
        with self._db.transaction() as conn:
            self._lock(conn, file)
            yield PgRecord(conn, file.user_key, name)

    def peek_record(self, user_key: str, name: str) -> str | None:
        """`user_key`'s record `name` as last committed (no lock)."""
        file = file_of("user", user_key)
        with self._db.connection() as conn:
            return read_record(conn, file.user_key, check_record_name(name))

    def record_names(self, user_key: str) -> list[str]:
        """The names of `user_key`'s records, sorted."""
        file = file_of("user", user_key)
        with self._db.connection() as conn:
            return record_names(conn, file.user_key)

    def user_keys(self) -> list[str]:
        """The people with a USER.md row or a record, sorted."""
        with self._db.connection() as conn:
            cur = conn.execute(
                "SELECT user_key FROM memory_versions WHERE target = 'user'"
                " UNION SELECT user_key FROM person_records"
            )
            return sorted(str(key) for (key,) in cur.fetchall())

    def content_digest(self) -> str:
        """The sha256 of everything held (see `memory_core.file_memory.digest`)."""
        return content_digest(self)

    def import_from(self, files: Readable) -> dict[str, int]:
        """Copy everything `files` holds into this store, which must hold nothing yet:
        MEMORY.md, then each person, each in one transaction (a savepoint of the move's
        one transaction when the store is over a `PgOneTransaction`), entries with their writers,
        the whole history (ids and times kept), the archive and the records, verbatim;
        {"people", "entries", "changes", "archived", "records"}: how many of each."""
        if self.user_keys() or self.read("memory").entries or self.history("memory"):
            raise MemoryFileError("the PostgreSQL memory is not empty: import only into a new one")
        counts = dict.fromkeys(("people", "entries", "changes", "archived", "records"), 0)
        files_of: list[tuple[Target, str | None]] = [("memory", None)]
        for target, key in files_of + [("user", k) for k in files.user_keys()]:
            copy = functools.partial(self._copy, files=files, target=target, user_key=key)
            copied = self._db.transact(copy)
            for name, count in copied.items():
                counts[name] += count
        return counts

    def _copy(
        self, conn: Connection, files: Readable, target: Target, user_key: str | None
    ) -> dict[str, int]:
        """One file's entries, history, archive and records from `files`, as they are."""
        file = file_of(target, user_key)
        origins = files.origins(target, user_key)
        changes = list(reversed(files.history(target, user_key, None)))
        archived = files.archived(file.user_key) if file.person else []
        names = files.record_names(file.user_key) if file.person else []
        if not (origins or changes or archived or names):
            return {}
        self._lock(conn, file)
        write_entries(conn, file, [], origins)
        insert_changes(conn, file, changes)
        add_archive(conn, file, archived)
        for name in names:
            text = files.peek_record(file.user_key, name)
            if text is not None:
                PgRecord(conn, file.user_key, name).write(text)
        people = 1 if file.person else 0
        return {
            "people": people,
            "entries": len(origins),
            "changes": len(changes),
            "archived": len(archived),
            "records": len(names),
        }

    def _lock(self, conn: Connection, file: MemoryFile) -> int:
        """Lock `file`'s version row (creating it), then check the fence; its version."""
        for _ in range(_LOCK_TRIES):
            conn.execute(
                "INSERT INTO memory_versions (target, user_key) VALUES (%s, %s)"
                " ON CONFLICT DO NOTHING",
                file.key,
            )
            cur = conn.execute(
                "SELECT version FROM memory_versions"
                " WHERE target = %s AND user_key = %s FOR UPDATE",
                file.key,
            )
            row = cur.fetchone()
            if file.person is not None:
                self.fence.check(file.person)  # erased while we waited: nothing lands
                if self.fence.remote is not None:  # erased by another replica, too
                    check_erased_sync(conn, file.person, current_mark())
            if row is not None:
                return int(row[0])
        raise PostgresConflictError(f"the {file.target} memory kept being deleted under a write")

    def _state(self, target: Target, entries: Sequence[str]) -> MemoryState:
        return MemoryState(target, tuple(entries), usage(entries), self.limit(target))

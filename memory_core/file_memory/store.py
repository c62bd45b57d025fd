"""File memory: one shared MEMORY.md and one USER.md per user, under `<home>/memories/`.

Layout: ``memories/MEMORY.md`` and ``memories/users/<user key>/USER.md``. Every
write takes an exclusive lock on a ``<file>.lock`` sidecar (created 0600,
never through a symlink), re-reads the file under the lock, refuses to touch a
file that was edited by hand out of shape (keeping a timestamped backup),
applies the operations all-or-nothing and replaces the file atomically, then
records the changes in its history (`ledger`) and who wrote each live entry in
``<name>.entries.json`` (`entry_records`). `forget` removes an entry for good,
with every copy of its text in the folder (`forgetting`).
Readers take no lock: a replace is atomic, so they see the old or the new file.

The store does not decide who may write what; `MemoryTool` does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from filelock import FileLock, Timeout

from memory_core.atomic import atomic_write_text
from memory_core.errors import (
    InvalidUserKeyError,
    MemoryDriftError,
    MemoryFileError,
    MemoryLockError,
    OverBudgetError,
    UndecodableMemoryError,
    UndoRefusedError,
    UnreadableMemoryError,
)
from memory_core.fence import ErasureFence
from memory_core.file_memory.backups import backup, scrub_backups
from memory_core.file_memory.digest import content_digest
from memory_core.file_memory.edits import Operation, apply_operations
from memory_core.file_memory.entries import file_text, is_canonical, parse_entries, usage
from memory_core.file_memory.entry_records import (
    change_drafts,
    entries_path,
    live_origins,
    read_records,
    settled,
    without_writer,
    write_records,
)
from memory_core.file_memory.forgetting import (
    PENDING_FILE,
    ForgetResult,
    plan_forget,
    scrub_pending,
)
from memory_core.file_memory.ledger import (
    ARCHIVE_LOST,
    HISTORY_LIMIT,
    HISTORY_SLACK,
    NOTHING_TO_UNDO,
    ArchivedEntry,
    EntryOrigin,
    LedgerChange,
    append_changes,
    archive_path,
    fit_by_archiving,
    forget_writer,
    history_path,
    made_changes,
    pick_undo,
    read_archive,
    read_changes,
    rewrite_changes,
    undo_outcome,
    write_archive,
)
from memory_core.file_memory.origin import OPERATOR, Origin
from memory_core.file_memory.records import (
    FileRecord,
    PersonRecord,
    check_record_name,
    is_record_name,
    read_record_file,
)
from memory_core.file_memory.render import (
    MEMORY_TITLE,
    USER_TITLE,
    MemorySnapshot,
    render_block,
    render_unreadable,
    usage_label,
)
from memory_core.user_keys import check_user_key

Target = Literal["memory", "user"]
TARGETS: tuple[Target, ...] = ("memory", "user")
MEMORY_FILE = "MEMORY.md"
# filelock polls a busy lock; a write holds it for about a millisecond, so the
# default 50 ms poll would make every contended write wait far longer than needed.
_LOCK_POLL = 0.002
USER_FILE = "USER.md"
_USER_RECORDS = entries_path(Path(USER_FILE)).name  # kept with the entries, never a record


@dataclass(frozen=True)
class MemoryState:
    """The entries of one file as read, with their usage and budget."""

    target: Target
    entries: tuple[str, ...]
    chars: int
    limit: int

    @property
    def usage_label(self) -> str:
        return usage_label(self.chars, self.limit)


@dataclass(frozen=True)
class WriteResult:
    """The state after a write, whether the file changed, and one note per operation."""

    state: MemoryState
    changed: bool
    notes: tuple[str, ...]
    archived: tuple[str, ...] = ()  # entries moved to the archive to make room


@dataclass(frozen=True)
class UndoResult:
    """The change reverted, the undo change(s) recorded, and the state after."""

    undone: LedgerChange
    made: tuple[LedgerChange, ...]
    write: WriteResult


class FileMemoryStore:
    """MEMORY.md and the USER.md files under one data directory."""

    def __init__(
        self,
        home: Path,
        *,
        memory_char_limit: int = 2200,
        user_char_limit: int = 1375,
        lock_timeout: float = 10.0,
        fence: ErasureFence | None = None,
    ) -> None:
        """`fence`: the erasures a write about a person is checked against (see
        `memory_core.fence`); share one with the other stores."""
        self._root = Path(home) / "memories"
        self.fence = fence if fence is not None else ErasureFence()
        self._limits: dict[Target, int] = {"memory": memory_char_limit, "user": user_char_limit}
        self._lock_timeout = lock_timeout

    def limit(self, target: Target) -> int:
        """The budget of `target` in characters."""
        return self._limits[_checked_target(target)]

    def path(self, target: Target, user_key: str | None = None) -> Path:
        """The file of `target`; `user_key` is required for (and only used by) `user`."""
        if _checked_target(target) == "memory":
            return self._root / MEMORY_FILE
        if user_key is None:
            raise InvalidUserKeyError("the user target needs a user key")
        users = self._root / "users"
        path = users / check_user_key(user_key) / USER_FILE
        # Belt and braces: even a symlinked folder must not lead outside users/.
        if not path.resolve().is_relative_to(users.resolve()):
            raise InvalidUserKeyError(f"user key {user_key!r} resolves outside the users folder")
        return path

    def read(self, target: Target, user_key: str | None = None) -> MemoryState:
        """The live entries of `target` (a missing file has none)."""
        text = _read_text(self.path(target, user_key))
        return self._state(target, parse_entries(text))

    def apply(
        self,
        target: Target,
        user_key: str | None,
        operations: Sequence[Operation],
        origin: Origin = OPERATOR,
    ) -> WriteResult:
        """Apply `operations` to the file all-or-nothing, under its lock, recording each
        entry change in its history as made by `origin`. When an add would overflow a
        USER.md, the oldest entries the person did not write move to its archive first
        (`ledger.fit_by_archiving`); if only their own entries could go, it is refused."""
        if not operations:
            raise MemoryFileError("no operations given")
        path = self.path(target, user_key)
        limit = self.limit(target)
        with self._writing(path, user_key if target == "user" else None):
            text = self._read_for_write(path)
            entries = parse_entries(text)
            self._check_drift(path, text, entries, limit)
            records = self._origins(path, entries)
            try:
                moved: list[EntryOrigin] = []
                outcome = apply_operations(entries, operations, limit)
            except OverBudgetError as full:
                if target != "user":
                    raise
                outcome, moved = fit_by_archiving(entries, operations, limit, records, full)
            if outcome.changed:
                _remove_stale_temps(path)
                atomic_write_text(path, file_text(outcome.entries))
                drafts = change_drafts(moved, outcome.changes, records)
                made = append_changes(history_path(path), drafts, origin)
                write_records(entries_path(path), settled(outcome.entries, records, made))
                if moved:
                    archived = [
                        ArchivedEntry(m.text, m.origin, c.at, c.id, m.evidence)
                        for m, c in zip(moved, made, strict=False)
                    ]
                    write_archive(
                        archive_path(path), [*read_archive(archive_path(path)), *archived]
                    )
        state = self._state(target, outcome.entries)
        return WriteResult(state, outcome.changed, outcome.notes, tuple(m.text for m in moved))

    def undo(
        self,
        target: Target,
        user_key: str | None,
        change_id: int | None = None,
        origin: Origin = OPERATOR,
    ) -> UndoResult:
        """Revert the latest change still in force, or change `change_id`, as a new change
        by `origin`; `UndoRefusedError` (one line) when a later change touched its entry,
        the entry was edited by hand since, it no longer fits, or it was forgotten."""
        path = self.path(target, user_key)
        if not history_path(path).exists():
            raise UndoRefusedError(NOTHING_TO_UNDO)
        limit = self.limit(target)
        with self._writing(path, user_key if target == "user" else None):
            text = self._read_for_write(path)
            entries = parse_entries(text)
            self._check_drift(path, text, entries, limit)
            history = read_changes(history_path(path))
            change = pick_undo(history, change_id)
            archive = read_archive(archive_path(path))
            kept = next((a for a in archive if a.change_id == change.id), None)
            if change.action == "archive" and kept is None:
                raise UndoRefusedError(ARCHIVE_LOST, change_id=change.id)
            outcome = undo_outcome(change, entries, limit)
            records = self._origins(path, entries, history)
            _remove_stale_temps(path)
            atomic_write_text(path, file_text(outcome.entries))
            drafts = change_drafts((), outcome.changes, records, undoes=change.id)
            made = append_changes(history_path(path), drafts, origin)
            write_records(
                entries_path(path), settled(outcome.entries, records, made, history, kept)
            )
            if change.action == "archive":
                write_archive(archive_path(path), [a for a in archive if a.change_id != change.id])
        state = self._state(target, outcome.entries)
        return UndoResult(change, tuple(made), WriteResult(state, True, outcome.notes))

    def forget(
        self, user_key: str, texts: Sequence[str], origin: Origin = OPERATOR
    ) -> ForgetResult:
        """Remove each of `texts` that is an entry of `user_key`'s USER.md or archive, for good,
        with every copy of its text in their folder (see `forgetting`); what was forgotten.

        Every file that held the text is replaced (atomically: the old file is gone); the
        history keeps a "forget" line per entry, by `origin`, and no undo brings it back."""
        path = self.path("user", user_key)
        limit = self.limit("user")
        if not path.parent.is_dir():
            return ForgetResult((), ())  # nothing held: no folder is made for nothing
        with self._writing(path, user_key):
            text = self._read_for_write(path)
            entries = parse_entries(text)
            self._check_drift(path, text, entries, limit)
            history = read_changes(history_path(path))
            archive = read_archive(archive_path(path))
            plan = plan_forget(texts, self._origins(path, entries, history), archive, history)
            if not plan.forgotten:
                return plan.result()
            _remove_stale_temps(path)
            atomic_write_text(path, file_text(plan.entries))
            write_records(entries_path(path), plan.records)
            write_archive(archive_path(path), plan.archive)
            next_id = history[-1].id + 1 if history else 1
            lines = [*plan.history, *made_changes(plan.drafts, origin, next_id, time.time())]
            if len(lines) > HISTORY_LIMIT + HISTORY_SLACK:
                lines = lines[-HISTORY_LIMIT:]
            rewrite_changes(history_path(path), lines)
            pending = path.with_name(PENDING_FILE)
            scrubbed = scrub_pending(read_record_file(pending), plan.versions, plan.message_ids)
            if scrubbed is not None:
                FileRecord(pending).write(scrubbed)
            scrub_backups(path, plan.versions)
        return plan.result()

    def history(
        self, target: Target, user_key: str | None = None, limit: int | None = 20
    ) -> tuple[LedgerChange, ...]:
        """The latest `limit` changes of `target` (None: all it keeps), newest first."""
        changes = read_changes(history_path(self.path(target, user_key)))
        kept = changes if limit is None else changes[-limit:] if limit > 0 else []
        return tuple(reversed(kept))

    def origins(self, target: Target, user_key: str | None = None) -> list[EntryOrigin]:
        """The live entries of `target`, each with who wrote it, when, and its evidence: as
        kept with the entries, else as the history tells, else the operator's."""
        path = self.path(target, user_key)
        return self._origins(path, parse_entries(_read_text(path)))

    def _origins(
        self, path: Path, entries: Sequence[str], history: Sequence[LedgerChange] | None = None
    ) -> list[EntryOrigin]:
        def changes() -> Sequence[LedgerChange]:
            return history if history is not None else read_changes(history_path(path))

        return live_origins(entries, read_records(entries_path(path)), changes)

    def archived(self, user_key: str) -> list[ArchivedEntry]:
        """The entries moved out of `user_key`'s full USER.md, oldest first."""
        return read_archive(archive_path(self.path("user", user_key)))

    @contextlib.contextmanager
    def person_record(self, user_key: str, name: str) -> Iterator[PersonRecord]:
        """`user_key`'s record `name` (the file of that name beside USER.md), under
        USER.md's lock; an erased person is refused as for a write."""
        path = self.path("user", user_key)
        _check_record(name)
        with self._writing(path, user_key):
            yield FileRecord(path.with_name(name))

    def peek_record(self, user_key: str, name: str) -> str | None:
        """`user_key`'s record `name` as last written (no lock: a write replaces it atomically)."""
        return read_record_file(self.path("user", user_key).with_name(_check_record(name)))

    def record_names(self, user_key: str) -> list[str]:
        """The names of `user_key`'s records, sorted."""
        folder = self.path("user", user_key).parent
        if not folder.is_dir():
            return []
        return sorted(
            p.name
            for p in folder.iterdir()
            if is_record_name(p.name) and p.name != _USER_RECORDS and p.is_file()
        )

    def user_keys(self) -> list[str]:
        """The people with a folder under ``memories/users/``, sorted."""
        users = self._root / "users"
        if not users.is_dir():
            return []
        return sorted(p.name for p in users.iterdir() if p.is_dir() and _is_user_key(p.name))

    def content_digest(self) -> str:
        """The sha256 of everything held (see `memory_core.file_memory.digest`)."""
        return content_digest(self)

    @contextlib.contextmanager
    def _writing(self, path: Path, person: str | None) -> Iterator[None]:
        """Hold `path`'s lock for a write, refusing a person erased before or meanwhile."""
        if person is not None:
            self.fence.check(person)  # before creating their folder again
        _make_dirs(path.parent, self._root.parent)
        with self._locked(path):
            if person is not None and not self.fence.allows(person):
                _remove_if_only_lock(path)  # erased meanwhile: leave no folder behind
                self.fence.check(person)
            yield

    def erase_user(self, user_key: str) -> bool:
        """Remove `user_key`'s folder (USER.md, its lock, backups, history, archive) and
        their name from MEMORY.md's history (as the admin who wrote there); whether there
        was a folder.

        The folder goes under USER.md's lock, so a write in progress finishes first
        and one waiting for the lock then meets the fence (call `fence.erasing` first).
        """
        folder = self._root / "users" / check_user_key(user_key)  # even one symlinked away
        shared = self.path("memory")
        if history_path(shared).exists() or entries_path(shared).exists():
            with self._locked(shared):
                forget_writer(history_path(shared), user_key)
                records = read_records(entries_path(shared))
                kept = without_writer(list(records.values()), user_key)
                if kept is not None:
                    write_records(entries_path(shared), kept)
        if folder.is_symlink() or folder.is_file():
            folder.unlink()
            return True
        if not folder.exists():
            return False
        with self._locked(folder / USER_FILE):
            shutil.rmtree(folder)
        return True

    def snapshot(self, user_key: str | None, include_profile: bool) -> MemorySnapshot:
        """Render the prompt blocks once: MEMORY.md, and the user's USER.md if asked."""
        problems: list[str] = []
        memory_block = self._block("memory", None, MEMORY_TITLE, problems)
        user_block = ""
        if include_profile and user_key is not None:
            user_block = self._block("user", user_key, USER_TITLE, problems)
        return MemorySnapshot(memory_block, user_block, tuple(problems))

    def _block(self, target: Target, user_key: str | None, title: str, problems: list[str]) -> str:
        try:
            state = self.read(target, user_key)
        except UnreadableMemoryError as exc:
            problems.append(str(exc))
            return render_unreadable(title, str(exc))
        return render_block(title, state.entries, state.limit)

    def _state(self, target: Target, entries: Sequence[str]) -> MemoryState:
        return MemoryState(target, tuple(entries), usage(entries), self.limit(target))

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        lock_path = path.with_name(path.name + ".lock")
        _prepare_lock_file(lock_path)
        try:
            with FileLock(
                lock_path, timeout=self._lock_timeout, mode=0o600, poll_interval=_LOCK_POLL
            ):
                yield
        except Timeout:
            raise MemoryLockError(
                f"{path.name} is busy: its lock was not free within {self._lock_timeout:g} s"
            ) from None

    def _read_for_write(self, path: Path) -> str:
        try:
            return _read_text(path)
        except UndecodableMemoryError as exc:
            copy = backup(path)
            raise UndecodableMemoryError(
                f"{exc}; nothing was written, a copy is kept at {copy.name}"
            ) from exc

    def _check_drift(self, path: Path, text: str, entries: list[str], limit: int) -> None:
        if is_canonical(text):
            longest = max((len(e) for e in entries), default=0)
            if longest <= limit:
                return
            why = f"one entry is {longest:,} chars, longer than the whole budget of {limit:,}"
        else:
            why = "it no longer splits into clean entries separated by lines holding only §"
        copy = backup(path)
        raise MemoryDriftError(
            f"{path.name} was edited outside the memory tool ({why}); the write was refused "
            f"so the edit is not lost, and a copy is kept at {copy.name}. Fix the file by "
            "hand or ask the operator",
            copy,
        )


def _check_record(name: str) -> str:
    """`name` if it may name a person record (not the entries' own file)."""
    if check_record_name(name) == _USER_RECORDS:
        raise MemoryFileError(f"invalid record name {name!r}: it holds the entries' writers")
    return name


def _checked_target(target: str) -> Target:
    if target not in TARGETS:
        raise MemoryFileError(f"unknown target {target!r}: use 'memory' or 'user'")
    return target


def _is_user_key(name: str) -> bool:
    try:
        check_user_key(name)
    except InvalidUserKeyError:
        return False
    return True


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise UnreadableMemoryError(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    try:
        # utf-8-sig: a byte-order mark left by a Windows editor is not content.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = data[exc.start]
        raise UndecodableMemoryError(
            f"{path.name} is not valid UTF-8 (byte 0x{bad:02x} at offset {exc.start})"
        ) from None


def _make_dirs(folder: Path, home: Path) -> None:
    """Create `folder` and its missing parents below `home`, each private (0700)."""
    missing = [p for p in (folder, *folder.parents) if p.is_relative_to(home) and p != home]
    try:
        home.mkdir(parents=True, exist_ok=True)
        for part in reversed(missing):
            part.mkdir(exist_ok=True, mode=0o700)
    except OSError as exc:
        raise MemoryFileError(f"cannot create {folder}: {exc.strerror or exc}") from exc


def _prepare_lock_file(lock_path: Path) -> None:
    """Create the lock file 0600 ourselves, refusing a symlink planted in its place."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(lock_path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise MemoryLockError(
                f"{lock_path.name} is a symbolic link; refusing to follow it"
            ) from None
        raise MemoryLockError(f"cannot create {lock_path.name}: {exc.strerror or exc}") from exc
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _remove_if_only_lock(path: Path) -> None:
    """Remove `path`'s folder if it holds nothing but `path`'s lock file."""
    lock = path.with_name(path.name + ".lock")
    if [p.name for p in path.parent.iterdir()] == [lock.name]:
        lock.unlink()
        path.parent.rmdir()


def _remove_stale_temps(path: Path) -> None:
    # Under the lock no other writer is mid-write, so any temp file of ours left
    # in the folder belongs to a writer that was killed.
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()

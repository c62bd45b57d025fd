"""Everything held about one person: counted, exported as one file, or erased.

A person's data lives in four places: USER.md with its history, archive, staged
changes and settings (the memory store: ``memories/users/<key>/`` on files, the
memory tables on PostgreSQL), their private
skills (``skills-private/<key>/``, and deleted ones under the skills archive),
their exports (``exports/<key>/``),
their sessions in state.db (messages, both full-text indexes, per-session
counters and stored prompts, which are columns of the session rows), and
whatever the external memory provider keeps. `PersonData` reaches all of
them through the stores; the chat commands (``/forget all``, ``/export``) and
the operator CLI (``mnemo users``) share it.

Erasure first records a tombstone in each store's fence (`memory_core.fence`),
so that nothing begun before it (a turn still at the model, a queued provider
write, a review) can write about the person again, then removes under each
store's own lock. It purges state.db (`SessionStore.delete_user` merges both indexes and
checkpoints the WAL, with ``secure_delete`` on), so no file, row or index
segment keeps the person's text. An export is JSON Lines: first one line per
USER.md entry (``{"user": key, "memory_entry": text}``, with ``"evidence": [...]``
when the entry keeps any: the person's messages that grounded it), then one per change in
its history, oldest first (``{"user": key, "memory_change": {...}}``), one per
change staged for their approval and not yet expired (``{"user": key,
"memory_pending": {...}}``: id, action, content, against, reason, origin,
created, expires), one per archived entry (``{"user": key,
"memory_archived": {...}}``), their settings when they chose any (``{"user": key,
"settings": {...}}``, erased with their folder), then every message
in the import format of `memory_core.sessions.jsonl` (drop the ``memory_*``
and ``settings`` lines to import the rest with ``mnemo sessions import``).

A chat export (`export_for_chat`) is one file per person,
``exports/<key>/mnemo-<key>.jsonl``, replaced by the next one; it is meant to
be short-lived: `discard_export` removes it once it was sent (or when the
person forgets an entry it holds), and `sweep_exports` removes every chat
export older than a given age. Files written there by the operator's
``mnemo users export`` are not chat exports and are left alone.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memory_core.fence import ErasureFence
from memory_core.file_memory import (
    EntryOrigin,
    PendingChanges,
    PersonSettingsStore,
    StagedChange,
)
from memory_core.file_memory.backend import MemoryBackend
from memory_core.file_memory.origin import evidence_json
from memory_core.sessions.backend import SessionBackend
from memory_core.skills import SkillsStore
from memory_core.user_keys import check_user_key

EraseExternal = Callable[[str], Awaitable[list[str]]]
"""Erases a person in the memory providers; returns one line per failure."""

EXPORT_FILE_MODE = 0o600
CHAT_EXPORT_PREFIX = "mnemo-"


@dataclass(frozen=True)
class PersonHoldings:
    """What is held about one person (or, after an erasure, what was erased)."""

    user_key: str
    entries: int
    sessions: int
    messages: int
    skills: int
    provider_failures: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.entries or self.sessions or self.messages or self.skills)

    def summary(self) -> str:
        """``3 memory entries, 2 sessions (14 messages) and 1 skill``."""
        return (
            f"{_plural(self.entries, 'memory entry', 'memory entries')}, "
            f"{_plural(self.sessions, 'session', 'sessions')} "
            f"({_plural(self.messages, 'message', 'messages')}) "
            f"and {_plural(self.skills, 'skill', 'skills')}"
        )


@dataclass(frozen=True)
class ExportResult:
    """Where an export went and what it holds."""

    path: Path
    entries: int
    messages: int


class PersonData:
    """One person's data across the stores: count it, export it, erase it."""

    def __init__(
        self,
        memory: MemoryBackend,
        skills: SkillsStore,
        sessions: SessionBackend,
        erase_external: EraseExternal | None = None,
        exports_dir: Path | None = None,
        person_files: Callable[[str], Sequence[Path]] | None = None,
    ) -> None:
        """`erase_external` erases the person in the memory providers (None: none
        configured); `exports_dir` holds exports, one folder per person (erased too);
        `person_files` names other files holding a person's data (the console's history
        of what they typed), removed at erasure."""
        self._exports = exports_dir
        self._person_files = person_files
        self._memory = memory
        self._skills = skills
        self._sessions = sessions
        self._erase_external = erase_external

    async def holdings(self, user_key: str) -> PersonHoldings:
        """What is held about `user_key` now."""
        key = check_user_key(user_key)
        totals = await self._sessions.user_totals(key)
        return PersonHoldings(
            key,
            entries=len(self._memory.read("user", key).entries),
            sessions=totals.sessions,
            messages=totals.messages,
            skills=len(self._own_skill_names(key)),
        )

    async def erase(self, user_key: str) -> PersonHoldings:
        """Erase everything held about `user_key`; return what was erased.

        Local data goes first (it cannot fail halfway silently: an error
        raises); the providers' failures are reported in `provider_failures`.
        """
        before = await self.holdings(user_key)
        key = before.user_key
        for fence in {id(f): f for f in self._fences()}.values():
            fence.erasing(key)  # first: work begun before this writes nothing about them now
        deleted = await self._sessions.delete_user(key, purge=True)
        self._memory.erase_user(key)
        self._skills.erase_user(key)
        if self._exports is not None:
            _remove(self._exports / key)
        for path in self._person_files(key) if self._person_files is not None else ():
            _remove(path)
        failures = await self._erase_external(key) if self._erase_external is not None else []
        return PersonHoldings(
            key,
            entries=before.entries,
            sessions=deleted.sessions,
            messages=deleted.messages,
            skills=before.skills,
            provider_failures=tuple(failures),
        )

    def chat_export_path(self, user_key: str) -> Path:
        """The person's one chat export: ``<exports>/<key>/mnemo-<key>.jsonl``."""
        key = check_user_key(user_key)
        return self._exports_dir() / key / f"{CHAT_EXPORT_PREFIX}{key}.jsonl"

    async def export_for_chat(self, user_key: str) -> ExportResult:
        """Write the person's chat export, replacing the previous one."""
        return await self.export(user_key, self.chat_export_path(user_key))

    def discard_export(self, user_key: str) -> bool:
        """Remove the person's chat export, if there is one; whether one was removed."""
        path = self.chat_export_path(user_key)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        return True

    def sweep_exports(self, max_age: float, now: float | None = None) -> int:
        """Remove every chat export last written more than `max_age` seconds before `now`
        (default: the time now); how many were removed."""
        if self._exports is None or not self._exports.is_dir():
            return 0
        cutoff = (time.time() if now is None else now) - max_age
        removed = 0
        for folder in self._exports.iterdir():
            path = folder / f"{CHAT_EXPORT_PREFIX}{folder.name}.jsonl"
            try:
                if path.lstat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except (FileNotFoundError, NotADirectoryError):  # none, or removed meanwhile
                continue
        return removed

    def _exports_dir(self) -> Path:
        if self._exports is None:
            raise ValueError("no exports folder was given")
        return self._exports

    def export_path(self, user_key: str, now: float) -> Path:
        """Where an export made at `now` goes: ``<exports>/<key>/<key>-<UTC time>.jsonl``."""
        key = check_user_key(user_key)
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
        return self._exports_dir() / key / f"{key}-{stamp}.jsonl"

    async def export(self, user_key: str, path: Path) -> ExportResult:
        """Write `user_key`'s USER.md entries, their history, staged changes and archive, and
        their messages to `path` (mode 0600), replacing
        any file there at once: a reader sees the old file or the whole new one."""
        key = check_user_key(user_key)
        entries = self._memory.origins("user", key)
        lines = [json.dumps(_entry_line(key, e), ensure_ascii=False) for e in entries]
        changes = reversed(self._memory.history("user", key, None))  # oldest first
        ledger = [{"memory_change": c.as_json()} for c in changes]
        ledger += [{"memory_pending": _staged(c)} for c in PendingChanges(self._memory).list(key)]
        ledger += [{"memory_archived": a.as_json()} for a in self._memory.archived(key)]
        settings = PersonSettingsStore(self._memory).read(key)
        ledger += [] if settings.empty else [{"settings": settings.as_json()}]
        lines += [json.dumps({"user": key, **row}, ensure_ascii=False) for row in ledger]
        messages = await self._sessions.export_lines(key)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".export-", suffix=".tmp")
        try:
            os.fchmod(fd, EXPORT_FILE_MODE)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                for line in [*lines, *messages]:
                    out.write(line + "\n")
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return ExportResult(path, entries=len(entries), messages=len(messages))

    async def session_user_keys(self) -> list[str]:
        """People with at least one session in state.db."""
        return [totals.user_key for totals in await self._sessions.all_user_totals()]

    def known_user_keys(self) -> list[str]:
        """People with a profile in memory or private skills (sessions are asked separately)."""
        return sorted({*self._memory.user_keys(), *self._skills.people()})

    def _fences(self) -> list[ErasureFence]:
        return [self._memory.fence, self._skills.fence, self._sessions.fence]

    def _own_skill_names(self, key: str) -> list[str]:
        return [s.name for s in self._skills.skills(key) if s.owner == "user" and s.user_key == key]


def _entry_line(key: str, entry: EntryOrigin) -> dict[str, object]:
    """An entry as exported: its text, and its evidence when it keeps any."""
    line: dict[str, object] = {"user": key, "memory_entry": entry.text}
    if entry.evidence:
        line["evidence"] = evidence_json(entry.evidence)
    return line


def _staged(change: StagedChange) -> dict[str, object]:
    """A staged change as the person sees it (its batch is only the notice's bookkeeping)."""
    row = change.as_json()
    row.pop("batch", None)
    return row


def _remove(folder: Path) -> None:
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    elif folder.exists():
        shutil.rmtree(folder)


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"

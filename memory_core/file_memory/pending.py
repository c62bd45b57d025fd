"""Staged changes: memory writes that wait for the person's approval.

Each person's staged changes are their record ``USER.pending.json`` (on files,
that file beside their USER.md, mode 0600), read and written under the person's
lock (`MemoryBackend.person_record`), so erasing the person erases them too and
they work the same on files and PostgreSQL. A `StagedChange` holds what
to do (add, replace, remove), the full text of the entry it was made against
(a replace or remove is pinned to that entry: approving it is refused if the
entry changed meanwhile), who wanted it (`Origin`), why it waits, its evidence
(the person's messages that ground it, or, for a change staged because nothing
did, the closest one: shown, not trusted, and not written on approval), and when it
expires: after `DEFAULT_TTL` (seven days: a person who chats weekly still sees
it, and a guess about them does not linger longer than that). Changes staged
together (one background run) share a `batch`, which the person is told about
once.

`approve` writes through the store's `apply` with the staged origin, one
change at a time (so one refused change keeps the others), then drops the
decided changes from the file. A crash between the two leaves an approved
change still listed; approving it again adds nothing twice (an identical entry
is not added) and a pinned one is refused, since its entry is gone.

A background job may stage at most `FLAGGED_PER_DAY` changes a day for one
person whose text reads as an instruction (`memory_core.safety.instruction_reasons`);
beyond that `stage` raises `StagingLimitError` and nothing is kept. Whoever stages, at
most `MAX_WAITING` changes wait for one person at once (each stage rewrites their
record, so its size stays bounded): past it, `StagingLimitError` too.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.errors import MemoryEditError, MemoryFileError, NoMatchError, StagingLimitError
from memory_core.file_memory.backend import MemoryBackend
from memory_core.file_memory.edits import ACTIONS, Action, Operation
from memory_core.file_memory.forgetting import PENDING_FILE as PENDING_FILE
from memory_core.file_memory.origin import Evidence, Origin, evidence_from_json, evidence_json
from memory_core.file_memory.records import PersonRecord
from memory_core.file_memory.render import entry_handle

log = logging.getLogger(__name__)

DEFAULT_TTL = 7 * 24 * 3600.0
FLAGGED_PER_DAY = 3
MAX_WAITING = 100  # changes waiting for one person's approval at once
_DAY = 24 * 3600.0
CHANGED_MEANWHILE = "the entry it changes was edited or removed since, so it was not applied"


@dataclass(frozen=True)
class StagedChange:
    """One memory change waiting for the person's approval."""

    id: int  # per person, never reused
    batch: str  # the changes staged together share it
    action: Action
    content: str | None  # the new entry (add, replace)
    against: str | None  # the whole entry it was made against (replace, remove)
    origin: Origin
    reason: str  # why it waits, in a short phrase for the person
    created: float
    expires: float
    evidence: tuple[Evidence, ...] = ()  # for `content`; see the module's docstring
    grounded: bool = True  # False: `evidence` is the closest message, shown, never written

    def operation(self) -> Operation:
        """The edit to apply, pinned to the exact entry it was made against (with its
        evidence when the person's words grounded it)."""
        old = entry_handle(self.against) if self.against is not None else None
        evidence = self.evidence if self.grounded else ()
        return Operation(self.action, content=self.content, old_text=old, evidence=evidence)

    def describe(self) -> str:
        """One line for the person: "add “…”", "replace “…” with “…”", "remove “…”"."""
        if self.action == "add":
            return f"add “{_preview(self.content)}”"
        if self.action == "replace":
            return f"replace “{_preview(self.against)}” with “{_preview(self.content)}”"
        return f"remove “{_preview(self.against)}”"

    def as_json(self) -> dict[str, Any]:
        row = {
            "id": self.id,
            "batch": self.batch,
            "action": self.action,
            "content": self.content,
            "against": self.against,
            "origin": self.origin.as_json(),
            "reason": self.reason,
            "created": self.created,
            "expires": self.expires,
        }
        row |= {"evidence": evidence_json(self.evidence)} if self.evidence else {}
        return row | ({} if self.grounded else {"grounded": False})


@dataclass(frozen=True)
class Decision:
    """What approving did: the changes written, and each refused one with why."""

    applied: tuple[StagedChange, ...]
    refused: tuple[tuple[StagedChange, str], ...]
    missing: tuple[int, ...]  # asked-for ids that are not staged (decided, expired, unknown)


@dataclass(frozen=True)
class Proposal:
    """One change to stage: the operation, the whole entry it targets, and why it waits."""

    action: Action
    content: str | None
    against: str | None
    reason: str
    flagged: bool = False  # its text reads as an instruction (counts against the daily cap)
    evidence: tuple[Evidence, ...] = ()  # kept with the staged change, written on approval
    grounded: bool = True  # False: `evidence` is only the closest message (not written)


class PendingChanges:
    """The staged changes of every person, kept beside their USER.md."""

    def __init__(
        self,
        store: MemoryBackend,
        *,
        ttl: float = DEFAULT_TTL,
        flagged_per_day: int = FLAGGED_PER_DAY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._ttl = ttl
        self._flagged_per_day = flagged_per_day
        self._clock = clock

    @property
    def ttl(self) -> float:
        return self._ttl

    def new_batch(self) -> str:
        """A fresh batch id, for changes to be announced together."""
        return secrets.token_hex(8)

    def stage(
        self,
        user_key: str,
        proposals: Sequence[Proposal],
        origin: Origin,
        batch: str,
    ) -> tuple[StagedChange, ...]:
        """Keep `proposals` for `user_key`'s approval; the staged changes, ids set.

        A background origin (review, extraction) may stage only `flagged_per_day`
        flagged proposals a day: past that, `StagingLimitError` and nothing staged.
        """
        if not proposals:
            return ()
        now = self._clock()
        with self._store.person_record(user_key, PENDING_FILE) as record:
            data = self._load(record.read, user_key, now)
            flagged = [t for t in data["flagged"] if t > now - _DAY]
            wanted = sum(1 for p in proposals if p.flagged)
            if origin.kind in ("review", "extraction") and wanted:
                if len(flagged) + wanted > self._flagged_per_day:
                    log.warning(
                        "dropped %d flagged background entr%s for %s: %d staged today already",
                        wanted,
                        "y" if wanted == 1 else "ies",
                        user_key,
                        len(flagged),
                    )
                    raise StagingLimitError(
                        f"not saved: at most {self._flagged_per_day} entries that read as "
                        "instructions may wait for approval a day, and that many already did"
                    )
                flagged += [now] * wanted
            if len(data["changes"]) + len(proposals) > MAX_WAITING:
                raise StagingLimitError(
                    f"not saved: {len(data['changes'])} changes already wait for the person's "
                    f"approval (at most {MAX_WAITING}); ask them to decide on those first "
                    "(/memory pending)"
                )
            staged = []
            for proposal in proposals:
                data["next_id"] += 1
                staged.append(
                    StagedChange(
                        data["next_id"],
                        batch,
                        proposal.action,
                        proposal.content,
                        proposal.against,
                        origin,
                        proposal.reason,
                        now,
                        now + self._ttl,
                        proposal.evidence,
                        proposal.grounded,
                    )
                )
            data["changes"] = [*data["changes"], *staged]
            data["flagged"] = flagged
            self._save(record, data)
        return tuple(staged)

    def list(self, user_key: str) -> tuple[StagedChange, ...]:
        """`user_key`'s staged changes not yet expired, oldest first."""
        peek = functools.partial(self._store.peek_record, user_key, PENDING_FILE)
        return tuple(self._load(peek, user_key, self._clock())["changes"])

    def approve(self, user_key: str, ids: Iterable[int] | None = None) -> Decision:
        """Write the changes `ids` names (None: all) with their staged origin."""
        chosen, missing = self._choose(user_key, ids)
        applied: list[StagedChange] = []
        refused: list[tuple[StagedChange, str]] = []
        for change in chosen:
            why = self._apply(user_key, change)
            if why is None:
                applied.append(change)
            else:
                refused.append((change, why))
        self._drop(user_key, {c.id for c in chosen})
        return Decision(tuple(applied), tuple(refused), missing)

    def reject(
        self, user_key: str, ids: Iterable[int] | None = None
    ) -> tuple[tuple[StagedChange, ...], tuple[int, ...]]:
        """Drop the changes `ids` names (None: all); those dropped, and ids not staged."""
        chosen, missing = self._choose(user_key, ids)
        self._drop(user_key, {c.id for c in chosen})
        return chosen, missing

    def _choose(
        self, user_key: str, ids: Iterable[int] | None
    ) -> tuple[tuple[StagedChange, ...], tuple[int, ...]]:
        staged = self.list(user_key)
        if ids is None:
            return staged, ()
        wanted = list(dict.fromkeys(ids))
        by_id = {c.id: c for c in staged}
        return (
            tuple(by_id[i] for i in wanted if i in by_id),
            tuple(i for i in wanted if i not in by_id),
        )

    def _apply(self, user_key: str, change: StagedChange) -> str | None:
        """Write one change; None when done, else why it was refused."""
        if change.against is not None:
            entries = self._store.read("user", user_key).entries
            if change.against not in entries:
                return CHANGED_MEANWHILE
        try:
            self._store.apply("user", user_key, [change.operation()], origin=change.origin)
        except NoMatchError:
            return CHANGED_MEANWHILE
        except MemoryEditError as exc:
            return f"it was refused: {exc}"
        except MemoryFileError as exc:
            return f"it could not be written: {exc}"
        return None

    def _drop(self, user_key: str, ids: set[int]) -> None:
        if not ids or self._store.peek_record(user_key, PENDING_FILE) is None:
            return
        now = self._clock()
        with self._store.person_record(user_key, PENDING_FILE) as record:
            data = self._load(record.read, user_key, now)
            data["changes"] = [c for c in data["changes"] if c.id not in ids]
            self._save(record, data)

    def _load(self, read: Callable[[], str | None], user_key: str, now: float) -> dict[str, Any]:
        """The record's content, expired changes left out; a missing or unreadable record is
        empty (an unreadable one is logged: approvals are lost, never the person's USER.md)."""
        data: dict[str, Any] = {"next_id": 0, "changes": [], "flagged": []}
        try:
            text = read()
            if text is None:
                return data
            raw = json.loads(text)
        except (MemoryFileError, ValueError) as exc:
            log.warning(
                "%s of %s is unreadable and counts as empty: %s", PENDING_FILE, user_key, exc
            )
            return data
        if not isinstance(raw, dict):
            return data
        data["next_id"] = raw.get("next_id") if isinstance(raw.get("next_id"), int) else 0
        data["flagged"] = [t for t in raw.get("flagged", []) if isinstance(t, int | float)]
        changes = [_change(item) for item in raw.get("changes", [])]
        data["changes"] = [c for c in changes if c is not None and c.expires > now]
        data["next_id"] = max([data["next_id"], *(c.id for c in data["changes"])])
        return data

    def _save(self, record: PersonRecord, data: dict[str, Any]) -> None:
        body = {
            "next_id": data["next_id"],
            "changes": [c.as_json() for c in data["changes"]],
            "flagged": data["flagged"],
        }
        record.write(json.dumps(body, ensure_ascii=False, indent=1) + "\n")


def _change(item: object) -> StagedChange | None:
    if not isinstance(item, dict) or item.get("action") not in ACTIONS:
        return None
    try:
        change = StagedChange(
            id=int(item["id"]),
            batch=str(item.get("batch", "")),
            action=item["action"],
            content=_text(item.get("content")),
            against=_text(item.get("against")),
            origin=Origin.from_json(item.get("origin")),
            reason=str(item.get("reason", "")),
            created=float(item["created"]),
            expires=float(item["expires"]),
            evidence=evidence_from_json(item.get("evidence")),
            grounded=item.get("grounded", True) is not False,
        )
    except (KeyError, TypeError, ValueError):
        return None
    if change.action != "add" and change.against is None:
        return None
    if change.action != "remove" and change.content is None:
        return None
    return change


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _preview(text: str | None, limit: int = 80) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"

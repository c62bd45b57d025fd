"""The ledger of a memory file: its change history and (for USER.md) its archive.

Beside each memory file lie ``<name>.history.jsonl`` (``USER.md`` ->
``USER.history.jsonl``) and, for a person, ``USER.archive.jsonl``. Both are
mode 0600 and are written only under the memory file's lock, so they live and
die with the person's folder. A history line is one entry change:
``{"id", "at", "action", "before", "after", "origin", "undoes"}``, `id`
increasing per file, `action` one of add, replace, remove, consolidate, undo,
archive, forget, forgotten; ``"evidence"`` (of `after`) and ``"before_evidence"``
(of `before`, so an undo brings an entry back with its evidence) are lists of
`Evidence`, written only when not empty. A forgotten entry leaves one "forget"
line, and every line that held its text is rewritten as "forgotten", with no
text and no evidence; neither can be undone. The history keeps at least the
last `HISTORY_LIMIT` changes (it is cut back to that many once it holds
`HISTORY_SLACK` more), the archive the last `ARCHIVE_LIMIT` entries.

Who wrote a live entry is kept with the entry (`memory_core.file_memory.entry_records`);
the history is the fallback: the newest change whose `after` is its text (an
undo that brings an entry back keeps its first writer); an entry neither
explains was written by hand on disk and counts as the operator's. The
functions here are pure or touch only the ledger files; `FileMemoryStore`
calls them under the lock.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, get_args

from memory_core.atomic import atomic_write_text
from memory_core.errors import (
    MemoryCoreError,
    MemoryFileError,
    OverBudgetError,
    UndoRefusedError,
)
from memory_core.file_memory.edits import EditOutcome, Operation, apply_operations
from memory_core.file_memory.origin import (
    GROUNDED_KINDS,
    OPERATOR,
    Evidence,
    Origin,
    evidence_from_json,
    evidence_json,
)

LedgerAction = Literal[
    "add", "replace", "remove", "consolidate", "undo", "archive", "forget", "forgotten"
]
LEDGER_ACTIONS: tuple[LedgerAction, ...] = get_args(LedgerAction)
FORGETTING: tuple[LedgerAction, ...] = ("forget", "forgotten")
HISTORY_LIMIT = 1000
HISTORY_SLACK = 100
ARCHIVE_LIMIT = 500

# Why an undo is refused, as the person reads it: templates filled from the error's
# values, kept as constants so that a caller can show them in the person's language.
NOTHING_TO_UNDO = "There is no change left to undo."
FORGOTTEN_CHANGE = (
    "Change {change_id} can't be undone: it was about an entry you asked me to forget, "
    "and that is for good."
)
NO_SUCH_CHANGE = "There is no change {change_id} in the history."
IS_AN_UNDO = "Change {change_id} is itself an undo (of change {undoes}); it can't be undone."
ALREADY_UNDONE = "Change {change_id} was already undone (by change {by})."
CHANGED_LATER = (
    "Change {change_id} can't be undone: change {later} changed the same entry later "
    "(undo that one first)."
)
NO_LONGER_THERE = (
    "Change {change_id} can't be undone: the entry it wrote is no longer there as it left "
    "it (changed by hand?)."
)
NOTHING_IN_IT = "Change {change_id} has nothing to undo."
ALREADY_THERE = "Change {change_id} can't be undone: that entry is already there again."
ARCHIVE_LOST = "Change {change_id} can't be undone: the archive lost it."
NO_LONGER_FITS = (
    "Change {change_id} can't be undone: it no longer fits (the memory would be at "
    "{chars}/{limit} characters); remove an entry first."
)
UNDO_REFUSALS = (
    NOTHING_TO_UNDO, NO_SUCH_CHANGE, IS_AN_UNDO, ALREADY_UNDONE, CHANGED_LATER,
    NO_LONGER_THERE, NOTHING_IN_IT, ALREADY_THERE, ARCHIVE_LOST, NO_LONGER_FITS,
    FORGOTTEN_CHANGE,
)  # fmt: skip


@dataclass(frozen=True)
class LedgerChange:
    """One recorded entry change."""

    id: int
    at: float
    action: LedgerAction
    before: str | None
    after: str | None
    origin: Origin
    undoes: int | None = None
    evidence: tuple[Evidence, ...] = ()  # of `after`
    before_evidence: tuple[Evidence, ...] = ()  # of `before`

    def as_json(self) -> dict[str, Any]:
        row = {
            "id": self.id,
            "at": self.at,
            "action": self.action,
            "before": self.before,
            "after": self.after,
            "origin": self.origin.as_json(),
            "undoes": self.undoes,
        }
        return row | _evidence_keys(self.evidence, self.before_evidence)


@dataclass(frozen=True)
class Draft:
    """A change about to be recorded (the ledger gives it its id and time)."""

    action: LedgerAction
    before: str | None
    after: str | None
    undoes: int | None = None
    evidence: tuple[Evidence, ...] = ()  # of `after`
    before_evidence: tuple[Evidence, ...] = ()  # of `before`


@dataclass(frozen=True)
class EntryOrigin:
    """One live entry with who wrote it, when (`at` None: edited by hand on disk), and the
    person's messages that grounded it."""

    text: str
    origin: Origin
    at: float | None
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True)
class ArchivedEntry:
    """An entry moved out of a full USER.md: its text, its writer, when, by which change,
    and its evidence."""

    text: str
    origin: Origin
    at: float
    change_id: int
    evidence: tuple[Evidence, ...] = ()

    def as_json(self) -> dict[str, Any]:
        row = {
            "text": self.text,
            "origin": self.origin.as_json(),
            "at": self.at,
            "change_id": self.change_id,
        }
        return row | _evidence_keys(self.evidence)


def _evidence_keys(
    evidence: tuple[Evidence, ...], before: tuple[Evidence, ...] = ()
) -> dict[str, Any]:
    """The optional evidence keys of a stored line: only those that hold any."""
    keys: dict[str, Any] = {}
    if evidence:
        keys["evidence"] = evidence_json(evidence)
    if before:
        keys["before_evidence"] = evidence_json(before)
    return keys


def history_path(memory_file: Path) -> Path:
    return memory_file.with_name(memory_file.stem + ".history.jsonl")


def archive_path(memory_file: Path) -> Path:
    return memory_file.with_name(memory_file.stem + ".archive.jsonl")


def read_changes(path: Path) -> list[LedgerChange]:
    """The changes in a history file, oldest first (lines that do not parse are skipped)."""
    changes = []
    for data in _read_lines(path):
        change = _change(data)
        if change is not None:
            changes.append(change)
    return changes


def append_changes(
    path: Path, drafts: Sequence[Draft], origin: Origin, now: float | None = None
) -> list[LedgerChange]:
    """Record `drafts` as made by `origin`; the changes as recorded."""
    if not drafts:
        return []
    last_id, count = _tail(path)
    at = time.time() if now is None else now
    made = made_changes(drafts, origin, last_id + 1, at)
    if count + len(made) > HISTORY_LIMIT + HISTORY_SLACK:
        kept = [*read_changes(path), *made][-HISTORY_LIMIT:]
        _rewrite(path, (c.as_json() for c in kept))
    else:
        _append(path, (c.as_json() for c in made))
    return made


def _tail(path: Path) -> tuple[int, int]:
    """The id of the last change in a history file (0: none) and how many lines it has;
    only the last lines are parsed, so a write costs little with a long history."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return 0, 0
    except OSError as exc:
        raise MemoryFileError(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    for line in reversed(lines):
        try:
            data = json.loads(line)
        except ValueError:
            continue  # a torn last line of a killed writer
        change = _change(data) if isinstance(data, dict) else None
        if change is not None:
            return change.id, len(lines)
    return 0, len(lines)


def made_changes(
    drafts: Sequence[Draft], origin: Origin, first_id: int, at: float
) -> list[LedgerChange]:
    """`drafts` as changes made by `origin` at `at`, numbered from `first_id`."""
    return [
        LedgerChange(
            first_id + i, at, d.action, d.before, d.after, origin, d.undoes,
            d.evidence, d.before_evidence,
        )
        for i, d in enumerate(drafts)
    ]  # fmt: skip


def rewrite_changes(path: Path, changes: Sequence[LedgerChange]) -> None:
    """Replace the history file with `changes` (atomically: the old file is gone)."""
    _rewrite(path, (c.as_json() for c in changes))


def forget_writer(path: Path, user_key: str) -> bool:
    """Drop `user_key` as the named writer (`by`) of the changes in a history file; the
    changes stay, as an admin's. Whether any line named them."""
    changes = read_changes(path)
    if not any(c.origin.by == user_key for c in changes):
        return False
    kept = [
        replace(c, origin=replace(c.origin, by=None)) if c.origin.by == user_key else c
        for c in changes
    ]
    _rewrite(path, (c.as_json() for c in kept))
    return True


def entry_origins(entries: Sequence[str], changes: Sequence[LedgerChange]) -> list[EntryOrigin]:
    """Each of `entries` with its writer, as the history tells it."""
    writer: dict[str, LedgerChange] = {}
    for change in changes:
        if change.after is None:
            continue
        if change.action == "undo" and change.after in writer:
            continue  # brought back: still its first writer's entry
        writer[change.after] = change
    result = []
    for entry in entries:
        found = writer.get(entry)
        if found is None:
            result.append(EntryOrigin(entry, OPERATOR, None))
        else:
            result.append(EntryOrigin(entry, found.origin, found.at, found.evidence))
    return result


def brought_back(
    change: LedgerChange, history: Sequence[LedgerChange], kept: ArchivedEntry | None
) -> EntryOrigin:
    """Who wrote the entry the undo `change` brings back: the archive's record of it, else
    its first writer in `history` (the changes before the undo), else the undo's writer;
    with the evidence it had when it was taken away (the undo's)."""
    text = change.after or ""
    if kept is not None and kept.text == text:
        return EntryOrigin(text, kept.origin, kept.at, kept.evidence or change.evidence)
    found = entry_origins([text], history)[0]
    if found.at is None:
        return EntryOrigin(text, change.origin, change.at, change.evidence)
    return EntryOrigin(text, found.origin, found.at, change.evidence)


def undone_ids(changes: Sequence[LedgerChange]) -> dict[int, int]:
    """Undone change id -> the id of the undo that reverted it."""
    return {c.undoes: c.id for c in changes if c.action == "undo" and c.undoes is not None}


def pick_undo(changes: Sequence[LedgerChange], change_id: int | None) -> LedgerChange:
    """The change to revert (the latest one still in force, or `change_id`), or refuse."""
    undone = undone_ids(changes)
    if change_id is None:
        live = [
            c for c in changes
            if c.action not in ("undo", *FORGETTING) and c.id not in undone
        ]  # fmt: skip
        if not live:
            raise UndoRefusedError(NOTHING_TO_UNDO)
        return live[-1]
    found = next((c for c in changes if c.id == change_id), None)
    if found is None:
        raise UndoRefusedError(NO_SUCH_CHANGE, change_id=change_id)
    if found.action in FORGETTING:
        raise UndoRefusedError(FORGOTTEN_CHANGE, change_id=change_id)
    if found.action == "undo":
        raise UndoRefusedError(IS_AN_UNDO, change_id=change_id, undoes=found.undoes)
    if found.id in undone:
        raise UndoRefusedError(ALREADY_UNDONE, change_id=change_id, by=undone[found.id])
    cancelled = set(undone) | set(undone.values())
    touched = {t for t in (found.before, found.after) if t is not None}
    for later in changes:
        after_it = later.id > found.id and later.id not in cancelled
        if after_it and touched & {later.before, later.after}:
            raise UndoRefusedError(CHANGED_LATER, change_id=change_id, later=later.id)
    return found


def inverse(change: LedgerChange, entries: Sequence[str]) -> Operation:
    """The operation that reverts `change` on the live `entries`, or refuse; an entry it
    brings back comes with the evidence it had (`before_evidence`)."""
    back = change.before_evidence
    if change.after is not None and change.action != "consolidate":
        if change.after not in entries:
            raise UndoRefusedError(NO_LONGER_THERE, change_id=change.id)
        if change.before is None:
            return Operation("remove", old_text=change.after)
        return Operation("replace", content=change.before, old_text=change.after, evidence=back)
    if change.before is None:
        raise UndoRefusedError(NOTHING_IN_IT, change_id=change.id)
    if change.before in entries:
        raise UndoRefusedError(ALREADY_THERE, change_id=change.id)
    return Operation("add", content=change.before, evidence=back)


def undo_outcome(change: LedgerChange, entries: Sequence[str], limit: int) -> EditOutcome:
    """`entries` with `change` reverted within `limit`, or refuse (an undo that no longer
    fits the budget is refused in the person's words, not the budget's)."""
    try:
        return apply_operations(entries, [inverse(change, entries)], limit)
    except OverBudgetError as full:
        raise UndoRefusedError(
            NO_LONGER_FITS, change_id=change.id, chars=full.chars_after, limit=limit
        ) from full


def read_archive(path: Path) -> list[ArchivedEntry]:
    """The archived entries, oldest first."""
    archived = []
    for data in _read_lines(path):
        text, at, change_id = data.get("text"), data.get("at"), data.get("change_id")
        if isinstance(text, str) and isinstance(at, int | float) and isinstance(change_id, int):
            origin, evidence = Origin.from_json(data.get("origin")), data.get("evidence")
            archived.append(
                ArchivedEntry(text, origin, at, change_id, evidence_from_json(evidence))
            )
    return archived


def write_archive(path: Path, archived: Iterable[ArchivedEntry]) -> None:
    """Replace the archive with `archived` (its last `ARCHIVE_LIMIT` entries)."""
    kept = list(archived)[-ARCHIVE_LIMIT:]
    if not kept and not path.exists():
        return
    _rewrite(path, (a.as_json() for a in kept))


def _change(data: dict[str, Any]) -> LedgerChange | None:
    change_id, at, action = data.get("id"), data.get("at"), data.get("action")
    before, after, undoes = data.get("before"), data.get("after"), data.get("undoes")
    if not isinstance(change_id, int) or not isinstance(at, int | float):
        return None
    if action not in LEDGER_ACTIONS:
        return None
    if not all(v is None or isinstance(v, str) for v in (before, after)):
        return None
    undone = undoes if isinstance(undoes, int) else None
    origin = Origin.from_json(data.get("origin"))
    evidence = evidence_from_json(data.get("evidence"))
    before_evidence = evidence_from_json(data.get("before_evidence"))
    return LedgerChange(
        change_id, at, action, before, after, origin, undone, evidence, before_evidence
    )


def _read_lines(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise MemoryFileError(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    rows = []
    for line in text.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue  # a torn last line of a killed writer, or a hand edit
        if isinstance(data, dict):
            rows.append(data)
    return rows


def _lines(rows: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _append(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(_lines(rows))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise MemoryFileError(f"cannot write {path.name}: {exc.strerror or exc}") from exc


def _rewrite(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    atomic_write_text(path, _lines(rows), mode=0o600)


def fit_by_archiving(
    entries: Sequence[str],
    operations: Sequence[Operation],
    limit: int,
    origins: Sequence[EntryOrigin],
    full: OverBudgetError,
) -> tuple[EditOutcome, list[EntryOrigin]]:
    """Apply `operations` after moving out the fewest entries the person did not write (and
    no operation names); the outcome and the entries moved, or raise `full`.

    `origins` are the live entries with their writers. The operator's, an admin's and
    hand-written entries go first, oldest first; then those learned in the background
    (grounded in the person's words), oldest first; the person's own never."""
    named = [op.old_text.strip() for op in operations if op.old_text and op.old_text.strip()]
    candidates = [
        (o.origin.kind in GROUNDED_KINDS, o.at or 0.0, i, o)
        for i, o in enumerate(origins)
        if o.origin.kind != "person" and not any(n in o.text for n in named)
    ]
    candidates.sort(key=lambda c: c[:3])
    for count in range(1, len(candidates) + 1):
        moved = [c[3] for c in candidates[:count]]
        gone = {o.text for o in moved}
        try:
            outcome = apply_operations([e for e in entries if e not in gone], operations, limit)
        except OverBudgetError:
            continue
        except MemoryCoreError:
            break  # e.g. the new neighbours read as an injection: keep the plain refusal
        return outcome, moved
    raise full

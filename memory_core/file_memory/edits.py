"""Operations on an entry list: add, replace, remove, and all-or-nothing batches.

`apply_operations()` is pure: it takes the current entries, the operations and
the budget, and returns the new list or raises a typed error carrying what the
caller needs to recover (the current entries, the usage, the candidates).
New content is normalised, checked against the budget and safety-scanned,
alone and then together with the entries it ends up next to: the prompt shows
adjacent entries one after the other, so an injection split over two entries
("Ignore all previous" + "instructions and…") is refused like a whole one.

Matching `old_text`: a `blocked:<hash>` handle names that entry; otherwise an
exact whole-entry match wins; otherwise the entries containing it as a
substring. None, or more than one, is refused.

Budget: the final state is checked once, after every operation, so a batch can
free space and add in one call. A write may leave the store over budget only
if it does not make it larger (a hand-edited oversized file can still shrink).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memory_core.errors import (
    AmbiguousMatchError,
    BatchRejectedError,
    EntryTooLongError,
    MemoryCoreError,
    MemoryEditError,
    MissingOldTextError,
    NoMatchError,
    OverBudgetError,
    UnsafeContentError,
)
from memory_core.file_memory.entries import normalise_entry, usage
from memory_core.file_memory.origin import Evidence
from memory_core.file_memory.render import HANDLE_PREFIX, entry_handle, safe_view
from memory_core.safety import check, scan_joined

Action = Literal["add", "replace", "remove"]
ACTIONS: tuple[Action, ...] = ("add", "replace", "remove")
PREVIEW_CHARS = 80


@dataclass(frozen=True)
class Operation:
    """One edit. `add` needs content; `replace` needs old_text and content; `remove` old_text."""

    action: Action
    content: str | None = None
    old_text: str | None = None
    evidence: tuple[Evidence, ...] = ()
    """The person's messages that ground `content` (set by the grounding check, never by
    the model); recorded with the entry it writes."""


@dataclass(frozen=True)
class EntryChange:
    """What one operation did to one entry: its text before and after (None: none), and
    the evidence of `after` (the operation's)."""

    action: Literal["add", "replace", "remove", "consolidate"]
    before: str | None
    after: str | None
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True)
class EditOutcome:
    """The entries after the edits, whether anything changed, one note per operation,
    and the entry changes made (an operation that changed nothing has none)."""

    entries: tuple[str, ...]
    changed: bool
    notes: tuple[str, ...]
    changes: tuple[EntryChange, ...] = ()


def apply_operations(
    entries: Sequence[str], operations: Sequence[Operation], limit: int
) -> EditOutcome:
    """Apply every operation to a copy of `entries`, or none of them."""
    current = tuple(entries)
    work = list(current)
    notes: list[str] = []
    changes: list[EntryChange] = []
    for index, op in enumerate(operations):
        try:
            notes.append(_apply_one(work, op, current, limit, changes))
        except MemoryCoreError as exc:
            if len(operations) == 1:
                raise
            raise BatchRejectedError(index, len(operations), op.action, exc) from exc
    _check_joins(current, work)
    before, after = usage(current), usage(work)
    if after > limit and after > before:
        raise OverBudgetError(
            f"memory at {before:,}/{limit:,} chars; this write would make it "
            f"{after:,}/{limit:,}. Consolidate (replace or remove entries), "
            "then retry in this turn",
            chars_after=after,
            entries=current,
            limit=limit,
        )
    return EditOutcome(tuple(work), tuple(work) != current, tuple(notes), tuple(changes))


def _windows(entries: Sequence[str]) -> list[tuple[str, ...]]:
    """Each run of up to three adjacent entries."""
    return [tuple(entries[i : i + 3]) for i in range(len(entries) - 1)]


def _check_joins(current: Sequence[str], work: Sequence[str]) -> None:
    """Refuse entries that, read with their new neighbours, say what the scan refuses."""
    unchanged = set(_windows(current))
    for window in _windows(work):
        if window not in unchanged:
            findings = scan_joined(window)
            if findings:
                raise UnsafeContentError(findings[0])


def _apply_one(
    work: list[str],
    op: Operation,
    current: tuple[str, ...],
    limit: int,
    changes: list[EntryChange],
) -> str:
    if op.action not in ACTIONS:
        raise MemoryEditError(f"unknown action {op.action!r}: use add, replace or remove")
    if op.action == "add":
        entry = _new_entry(op.content, current, limit)
        if entry in work:
            return "already exists"
        work.append(entry)
        changes.append(EntryChange("add", None, entry, op.evidence))
        return "added"
    index = _find(work, op.old_text, current, limit)
    old = work[index]
    if op.action == "remove":
        del work[index]
        changes.append(EntryChange("remove", old, None))
        return "removed"
    if op.content is None or not op.content.strip():
        raise MemoryEditError("replace needs non-empty content; use remove to delete an entry")
    entry = _new_entry(op.content, current, limit)
    if entry in work and work.index(entry) != index:
        del work[index]  # the new text already exists: replacing merges the two
        changes.append(EntryChange("consolidate", old, entry, op.evidence))
        return "replaced (merged with an identical entry)"
    work[index] = entry
    if entry != old:
        changes.append(EntryChange("replace", old, entry, op.evidence))
    return "replaced"


def _new_entry(content: str | None, current: tuple[str, ...], limit: int) -> str:
    entry = normalise_entry(content or "")
    if len(entry) > limit:
        raise EntryTooLongError(
            f"the entry is {len(entry):,} chars but the whole store holds {limit:,}; "
            "write a shorter fact",
            entries=current,
            limit=limit,
        )
    check(entry)
    return entry


def _find(work: list[str], old_text: str | None, current: tuple[str, ...], limit: int) -> int:
    needle = (old_text or "").strip()
    if not needle:
        raise MissingOldTextError(
            "old_text is required: a short unique part of the entry to change",
            entries=current,
            limit=limit,
        )
    if needle.startswith(HANDLE_PREFIX):
        for i, entry in enumerate(work):
            if entry_handle(entry) == needle:
                return i
    if needle in work:
        return work.index(needle)
    hits = [i for i, entry in enumerate(work) if needle in entry]
    if not hits:
        raise NoMatchError(f"no entry contains {_preview(needle)}", entries=current, limit=limit)
    if len(hits) > 1:
        previews = [_preview(safe_view(work[i])) for i in hits]
        raise AmbiguousMatchError(
            f"{_preview(needle)} matches {len(hits)} entries: {', '.join(previews)}; "
            "be more specific",
            candidates=previews,
            entries=current,
            limit=limit,
        )
    return hits[0]


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) > PREVIEW_CHARS:
        flat = flat[: PREVIEW_CHARS - 1] + "…"
    return f'"{flat}"'

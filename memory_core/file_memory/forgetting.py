"""Forgetting an entry for good: what `forget` removes and what it keeps.

`/forget` means it: the entry goes from USER.md or the archive, and so does every
copy of its text — history lines whose before or after is the entry or an earlier
version of it (replace chains are followed back), archived copies, staged changes
that add, replace or remove it, and the evidence kept with any of these. What is
kept is that an entry was forgotten, and when: each history line that held its
text becomes a "forgotten" line (id, time and writer, no text, no evidence), and
one "forget" line records the forgetting. Neither can be undone (`pick_undo`).

`plan_forget` is pure and shared by both backends; `scrub_pending` works on the
text of the staged-changes record (``USER.pending.json``), expired changes
included. An earlier version that is itself a live or archived entry (written
again since) is not scrubbed: the person did not ask to forget it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memory_core.file_memory.ledger import (
    ArchivedEntry,
    Draft,
    EntryOrigin,
    LedgerChange,
)

PENDING_FILE = "USER.pending.json"  # the staged changes' record (`memory_core.file_memory.pending`)


@dataclass(frozen=True)
class ForgetResult:
    """The entries forgotten (those asked for that were found, live or archived) and the
    ids of the messages their evidence named (to redact them in the sessions too)."""

    forgotten: tuple[str, ...]
    message_ids: tuple[int, ...]


@dataclass(frozen=True)
class ForgetPlan:
    """What a forget leaves: the live entries with their records, the archive, the history
    with its scrubbed lines, and the "forget" lines to add."""

    forgotten: tuple[str, ...]
    versions: frozenset[str]  # every text scrubbed: the entries and their earlier versions
    records: tuple[EntryOrigin, ...]
    archive: tuple[ArchivedEntry, ...]
    history: tuple[LedgerChange, ...]
    scrubbed: tuple[int, ...]  # ids of the history lines rewritten as "forgotten"
    drafts: tuple[Draft, ...]
    message_ids: frozenset[int]

    @property
    def entries(self) -> tuple[str, ...]:
        return tuple(r.text for r in self.records)

    def result(self, more_ids: Iterable[int] = ()) -> ForgetResult:
        return ForgetResult(self.forgotten, tuple(sorted(self.message_ids | set(more_ids))))


def plan_forget(
    texts: Sequence[str],
    records: Sequence[EntryOrigin],
    archive: Sequence[ArchivedEntry],
    history: Sequence[LedgerChange],
) -> ForgetPlan:
    """Forget each of `texts` that is a live entry (`records`) or an archived one."""
    held = {r.text for r in records} | {a.text for a in archive}
    forgotten = tuple(dict.fromkeys(t for t in texts if t in held))
    versions = earlier_versions(forgotten, history, held - set(forgotten))
    ids: set[int] = set()
    kept_records = []
    for record in records:
        if record.text in versions:
            ids.update(e.message_id for e in record.evidence)
        else:
            kept_records.append(record)
    kept_archive = []
    for item in archive:
        if item.text in versions:
            ids.update(e.message_id for e in item.evidence)
        else:
            kept_archive.append(item)
    lines, scrubbed = [], []
    for change in history:
        if versions & {change.before, change.after}:
            ids.update(e.message_id for e in (*change.evidence, *change.before_evidence))
            scrubbed.append(change.id)
            change = replace(
                change, action="forgotten", before=None, after=None, evidence=(),
                before_evidence=(),
            )  # fmt: skip
        lines.append(change)
    return ForgetPlan(
        forgotten,
        versions,
        tuple(kept_records),
        tuple(kept_archive),
        tuple(lines),
        tuple(scrubbed),
        tuple(Draft("forget", None, None) for _ in forgotten),
        frozenset(ids),
    )


def earlier_versions(
    texts: Iterable[str], history: Sequence[LedgerChange], spare: Collection[str]
) -> frozenset[str]:
    """`texts` and every text a change turned into one of them (replace, consolidate, an
    undo that changed one back), followed back to the first; `spare` texts (entries held
    in their own right) are not followed."""
    found = set(texts)
    grown = True
    while grown:
        grown = False
        for change in history:
            before = change.before
            if change.after not in found or before is None:
                continue
            if before not in found and before not in spare:
                found.add(before)
                grown = True
    return frozenset(found)


def scrub_pending(text: str | None, versions: Collection[str]) -> str | None:
    """The staged-changes record `text` without the changes that add, replace or remove one
    of `versions` (expired ones too); None when nothing was dropped. (Their evidence is the
    closest message, shown, not trusted: it is not the entry's, so not reported.)"""
    if text is None:
        return None
    try:
        raw = json.loads(text)
    except ValueError:
        return None  # unreadable: the store reads it as empty; it is left as it is
    if not isinstance(raw, dict) or not isinstance(raw.get("changes"), list):
        return None
    kept = [item for item in raw["changes"] if not _names(item, versions)]
    if len(kept) == len(raw["changes"]):
        return None
    raw["changes"] = kept
    return json.dumps(raw, ensure_ascii=False, indent=1) + "\n"


def _names(item: Any, versions: Collection[str]) -> bool:
    """Whether the staged change `item` adds, replaces or removes one of `versions`."""
    if not isinstance(item, dict):
        return False
    return item.get("content") in versions or item.get("against") in versions

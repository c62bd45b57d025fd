"""Forgetting an entry for good: what `forget` removes and what it keeps.

`/forget` means it: the entry goes from USER.md or the archive, and so does every
copy of its text — history lines whose before or after is the entry or an earlier
version of it (replace chains are followed back), archived copies, staged changes
that add, replace or remove it, and the evidence kept with any of these. What is
kept is that an entry was forgotten, and when: each history line that held its
text becomes a "forgotten" line (id, time and writer, no text, no evidence), and
one "forget" line records the forgetting. Neither can be undone (`pick_undo`).

The messages the forgotten entries' evidence names are reported (`ForgetResult`)
so that the sessions redact them; every other evidence item naming one of them
goes too (another entry learned from the same message keeps its text, not that
message). `plan_forget` is pure and shared by both backends; `scrub_pending`
works on the text of the staged-changes record (``USER.pending.json``), expired
changes included. An earlier version that is itself a live or archived entry
(written again since) is not scrubbed: the person did not ask to forget it.
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
from memory_core.file_memory.origin import Evidence

PENDING_FILE = "USER.pending.json"  # the staged changes' record (`memory_core.file_memory.pending`)


@dataclass(frozen=True)
class ForgetResult:
    """The entries forgotten (those asked for that were found, live or archived) and the
    ids of the messages their evidence named (to redact them in the sessions too)."""

    forgotten: tuple[str, ...]
    message_ids: tuple[int, ...]
    versions: tuple[str, ...] = ()  # the entries and their earlier versions, all scrubbed


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
    retouched: tuple[int, ...]  # ids of other lines that lost evidence naming those messages
    drafts: tuple[Draft, ...]
    message_ids: frozenset[int]

    @property
    def entries(self) -> tuple[str, ...]:
        return tuple(r.text for r in self.records)

    def result(self) -> ForgetResult:
        return ForgetResult(
            self.forgotten, tuple(sorted(self.message_ids)), tuple(sorted(self.versions))
        )


def plan_forget(
    texts: Sequence[str],
    records: Sequence[EntryOrigin],
    archive: Sequence[ArchivedEntry],
    history: Sequence[LedgerChange],
) -> ForgetPlan:
    """Forget each of `texts` that is a live entry (`records`) or an archived one.

    The messages their evidence (and their earlier versions') names are forgotten too
    (the sessions redact them), so no other entry, archived entry or history line keeps
    an evidence item of one of them either."""
    held = {r.text for r in records} | {a.text for a in archive}
    forgotten = tuple(dict.fromkeys(t for t in texts if t in held))
    versions = earlier_versions(forgotten, history, held - set(forgotten))
    lines = [c for c in history if c.before in versions or c.after in versions]
    named = [
        *(r.evidence for r in records if r.text in versions),
        *(a.evidence for a in archive if a.text in versions),
        *(c.evidence + c.before_evidence for c in lines),
    ]
    ids = frozenset(e.message_id for evidence in named for e in evidence)
    kept_records = [
        replace(r, evidence=_kept(r.evidence, ids)) for r in records if r.text not in versions
    ]
    kept_archive = [
        replace(a, evidence=_kept(a.evidence, ids)) for a in archive if a.text not in versions
    ]
    scrubbed = {c.id for c in lines}
    new_history = [_forgotten(c) if c.id in scrubbed else _without(c, ids) for c in history]
    retouched = [
        n.id for n, c in zip(new_history, history, strict=True) if n.id not in scrubbed and n != c
    ]
    return ForgetPlan(
        forgotten,
        versions,
        tuple(kept_records),
        tuple(kept_archive),
        tuple(new_history),
        tuple(sorted(scrubbed)),
        tuple(retouched),
        tuple(Draft("forget", None, None) for _ in forgotten),
        ids,
    )


def _forgotten(change: LedgerChange) -> LedgerChange:
    """The line that keeps of `change` only its id, time and writer."""
    return replace(
        change, action="forgotten", before=None, after=None, evidence=(), before_evidence=()
    )


def _without(change: LedgerChange, ids: Collection[int]) -> LedgerChange:
    """`change` without the evidence items naming a message of `ids`."""
    evidence, before = _kept(change.evidence, ids), _kept(change.before_evidence, ids)
    if (evidence, before) == (change.evidence, change.before_evidence):
        return change
    return replace(change, evidence=evidence, before_evidence=before)


def _kept(evidence: tuple[Evidence, ...], ids: Collection[int]) -> tuple[Evidence, ...]:
    return tuple(e for e in evidence if e.message_id not in ids)


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


def scrub_pending(
    text: str | None, versions: Collection[str], ids: Collection[int] = ()
) -> str | None:
    """The staged-changes record `text` without the changes that add, replace or remove one
    of `versions` (expired ones too), and without evidence items naming a message of `ids`
    in the others; None when nothing changed. (A dropped change's evidence is not reported:
    it may be only the closest message, shown, not trusted, and not the entry's.)"""
    if text is None:
        return None
    try:
        raw = json.loads(text)
    except ValueError:
        return None  # unreadable: the store reads it as empty; it is left as it is
    if not isinstance(raw, dict) or not isinstance(raw.get("changes"), list):
        return None
    kept = [_stripped(item, ids) for item in raw["changes"] if not _names(item, versions)]
    if kept == raw["changes"]:
        return None
    raw["changes"] = kept
    return json.dumps(raw, ensure_ascii=False, indent=1) + "\n"


def _names(item: Any, versions: Collection[str]) -> bool:
    """Whether the staged change `item` adds, replaces or removes one of `versions`."""
    if not isinstance(item, dict):
        return False
    return item.get("content") in versions or item.get("against") in versions


def _stripped(item: Any, ids: Collection[int]) -> Any:
    """The staged change `item` without evidence items naming a message of `ids`."""
    if not isinstance(item, dict) or not isinstance(item.get("evidence"), list):
        return item
    evidence = [
        e for e in item["evidence"] if not (isinstance(e, dict) and e.get("message_id") in ids)
    ]
    if len(evidence) == len(item["evidence"]):
        return item
    return {k: v for k, v in item.items() if k != "evidence"} | (
        {"evidence": evidence} if evidence else {}
    )

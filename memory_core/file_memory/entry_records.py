"""Who wrote each live entry, kept with the entry: ``<name>.entries.json`` beside the file.

``USER.entries.json`` (and ``MEMORY.entries.json``) maps each live entry's text
to its writer, when it was written, and its evidence:
``{"entries": {text: {"origin": {...}, "at": float | null, "evidence": [...]}}}``.
`FileMemoryStore` rewrites it (atomically, mode 0600, under the memory file's
lock) after every write of the memory file and its history, so it holds the
live entries only. The history is trimmed; this file is not, so trimming never
changes who wrote an entry. An entry it does not hold (a data directory from
before it existed, a write killed between the history and this file, a hand
edit) falls back to the history, then to the operator (`live_origins`).

The functions here are pure or touch only this file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from memory_core.atomic import atomic_write_text
from memory_core.errors import MemoryFileError
from memory_core.file_memory.edits import EntryChange
from memory_core.file_memory.ledger import (
    ArchivedEntry,
    Draft,
    EntryOrigin,
    LedgerChange,
    brought_back,
    entry_origins,
)
from memory_core.file_memory.origin import Origin, evidence_from_json, evidence_json

ENTRIES_SUFFIX = ".entries.json"


def entries_path(memory_file: Path) -> Path:
    """``USER.md`` -> ``USER.entries.json``."""
    return memory_file.with_name(memory_file.stem + ENTRIES_SUFFIX)


def read_records(path: Path) -> dict[str, EntryOrigin]:
    """The records the file holds, by entry text (a missing or unreadable file: none)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}  # a hand edit gone wrong: the history still tells who wrote what
    entries = raw.get("entries") if isinstance(raw, dict) else None
    if not isinstance(entries, dict):
        return {}
    records = {}
    for text, data in entries.items():
        if not isinstance(data, dict):
            continue
        at = data.get("at")
        records[text] = EntryOrigin(
            text,
            Origin.from_json(data.get("origin")),
            float(at) if isinstance(at, int | float) else None,
            evidence_from_json(data.get("evidence")),
        )
    return records


def write_records(path: Path, records: Sequence[EntryOrigin]) -> None:
    """Replace the file with `records` (removed when there are none)."""
    if not records:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise MemoryFileError(f"cannot remove {path.name}: {exc.strerror or exc}") from exc
        return
    body = {"entries": {r.text: record_json(r) for r in records}}
    atomic_write_text(path, json.dumps(body, ensure_ascii=False, indent=1) + "\n", mode=0o600)


def record_json(record: EntryOrigin) -> dict[str, Any]:
    return {
        "origin": record.origin.as_json(),
        "at": record.at,
        "evidence": evidence_json(record.evidence),
    }


def live_origins(
    entries: Sequence[str],
    records: Mapping[str, EntryOrigin],
    history: Callable[[], Sequence[LedgerChange]],
) -> list[EntryOrigin]:
    """Each entry with its writer: its record, else the history (read only when some entry
    has no record), else the operator's."""
    missing = [e for e in entries if e not in records]
    found = {o.text: o for o in entry_origins(missing, history())} if missing else {}
    return [records[e] if e in records else found[e] for e in entries]


def change_drafts(
    moved: Sequence[EntryOrigin],
    changes: Sequence[EntryChange],
    records: Sequence[EntryOrigin],
    undoes: int | None = None,
) -> list[Draft]:
    """The history lines of a write: one per entry `moved` to the archive, then one per
    entry change (as "undo" lines when `undoes` is set), each with the evidence of the
    entry it wrote and of the one it took away."""
    held = {r.text: r.evidence for r in records}
    drafts = [Draft("archive", m.text, None, before_evidence=m.evidence) for m in moved]
    for c in changes:
        before = held.get(c.before, ()) if c.before is not None else ()
        action = "undo" if undoes is not None else c.action
        drafts.append(Draft(action, c.before, c.after, undoes, c.evidence, before))
    return drafts


def settled(
    entries: Sequence[str],
    records: Sequence[EntryOrigin],
    made: Sequence[LedgerChange],
    history: Sequence[LedgerChange] = (),
    kept: ArchivedEntry | None = None,
) -> list[EntryOrigin]:
    """The records of `entries` after a write that made the changes `made`: an entry a
    change wrote is that change's (an undo's: its first writer's, see `brought_back`, with
    `history` the changes before it and `kept` the archive's record), the others keep
    theirs."""
    writers = {r.text: r for r in records}
    for change in made:
        if change.after is None:
            continue
        if change.action == "undo":
            writers[change.after] = brought_back(change, history, kept)
        else:
            writers[change.after] = EntryOrigin(
                change.after, change.origin, change.at, change.evidence
            )
    return [writers[e] for e in entries]


def without_writer(records: Sequence[EntryOrigin], user_key: str) -> list[EntryOrigin] | None:
    """`records` with `user_key` no longer named as a writer (`by`); None if none named them."""
    if not any(r.origin.by == user_key for r in records):
        return None
    return [
        replace(r, origin=replace(r.origin, by=None)) if r.origin.by == user_key else r
        for r in records
    ]

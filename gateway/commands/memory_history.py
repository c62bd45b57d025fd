"""What `/memory` shows beside the entries: who wrote each, the history, undo, the archive.

`/memory` numbers the person's USER.md entries, each with its origin and date
(an entry no recorded change explains was edited by hand on disk and shows as
the operator's). `/memory history` lists their recent changes, numbered by the
change's id; `/memory undo` reverts the latest change still in force and
`/memory undo N` change N, each recorded as a change of its own (refused in one
line when a later change touched the same entry). `/memory archive` lists the
entries moved out of a full USER.md. Only the person's own files are read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from gateway.commands.registry import CommandReply, SessionControl
from memory_core import (
    ArchivedEntry,
    EntryOrigin,
    FileMemoryStore,
    LedgerChange,
    MemoryEditError,
    Origin,
    UndoRefusedError,
)

HISTORY_SHOWN = 20
PREVIEW_CHARS = 80
_UNDO_NUMBER = re.compile(r"#?(?P<digits>[0-9]{1,9})")


def when(at: float | None) -> str:
    """``2 Dec 2026`` (UTC), or that the entry was written by hand."""
    if at is None:
        return "edited by hand on disk"
    return datetime.fromtimestamp(at, UTC).strftime("%-d %b %Y")


def entry_lines(origins: Sequence[EntryOrigin]) -> list[str]:
    """The entries numbered from 1, each followed by who wrote it and when."""
    return [
        f"{i}. {o.text} ({o.origin.label()}, {when(o.at)})" for i, o in enumerate(origins, start=1)
    ]


def history_text(changes: Sequence[LedgerChange]) -> str:
    """The reply to /memory history: newest first, each numbered by its id."""
    if not changes:
        return "No changes to what I remember about you are recorded yet."
    lines = ["The latest changes to what I remember about you, newest first:"]
    for change in changes:
        stamp = datetime.fromtimestamp(change.at, UTC).strftime("%-d %b %H:%M")
        lines.append(f"#{change.id} {stamp} · {describe(change)} ({change.origin.label()})")
    lines.append("Send /memory undo to revert the latest, /memory undo N a given one.")
    return "\n".join(lines)


def describe(change: LedgerChange) -> str:
    """One change in a few words: ``added “…”``, ``replaced “…” with “…”``, …"""
    before, after = _quoted(change.before), _quoted(change.after)
    if change.action == "undo":
        if change.before is None:
            return f"undid #{change.undoes}: brought back {after}"
        if change.after is None:
            return f"undid #{change.undoes}: removed {before}"
        return f"undid #{change.undoes}: changed {before} back to {after}"
    if change.action == "add":
        return f"added {after}"
    if change.action == "remove":
        return f"removed {before}"
    if change.action == "archive":
        return f"moved {before} to the archive to make room"
    if change.action == "consolidate":
        return f"merged {before} into {after}"
    return f"replaced {before} with {after}"


def archive_text(archived: Sequence[ArchivedEntry]) -> str:
    """The reply to /memory archive: the moved entries, newest first."""
    if not archived:
        return "Nothing of yours was moved to the archive."
    lines = ["Moved out of a full memory to make room (newest first); /recall searches them:"]
    for item in reversed(archived):
        lines.append(
            f"- {item.text}\n  ({item.origin.label()}; archived {when(item.at)} by change "
            f"#{item.change_id}: /memory undo {item.change_id} brings it back)"
        )
    return "\n".join(lines)


async def undo(
    memory: FileMemoryStore,
    user_key: str,
    args: str,
    sessions: SessionControl | None,
    discard_export: Callable[[str], object] | None,
) -> CommandReply:
    """/memory undo [N] for `user_key`: revert, then rebuild their prompts without the old text."""
    change_id: int | None = None
    if args:
        number = _UNDO_NUMBER.fullmatch(args)
        if number is None:
            return CommandReply(
                "Send /memory undo to revert the latest change, or /memory undo N with a "
                "number from /memory history; nothing was changed."
            )
        change_id = int(number["digits"])
    try:
        result = memory.undo("user", user_key, change_id, Origin("person"))
    except UndoRefusedError as exc:
        return CommandReply(str(exc))
    except MemoryEditError as exc:  # any other refusal of the restored text
        return CommandReply(f"I couldn't undo that, so nothing changed: {exc}")
    if sessions is not None:
        await sessions.refresh_prompts(user_key)  # no stored prompt may keep the old text
    if discard_export is not None:
        discard_export(user_key)
    done = "; ".join(describe(c) for c in result.made) or "nothing left to change"
    return CommandReply(f"Undone #{result.undone.id}: {done}.")


def _quoted(text: str | None) -> str:
    if text is None:
        return ""
    flat = " ".join(text.split())
    if len(flat) > PREVIEW_CHARS:
        flat = flat[: PREVIEW_CHARS - 1] + "…"
    return f"“{flat}”"

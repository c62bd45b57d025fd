"""What `/memory` shows beside the entries: who wrote each, the history, undo, the archive.

`/memory` numbers the person's USER.md entries, each with its origin and date
(an entry no recorded change explains was edited by hand on disk and shows as
the operator's). `/memory history` lists their recent changes, numbered by the
change's id; `/memory undo` reverts the latest change still in force and
`/memory undo N` change N, each recorded as a change of its own (refused in one
line when a later change touched the same entry, or when it was about an entry
the person forgot: `/forget` is for good). `/memory archive` lists the entries
moved out of a full USER.md. `/memory why N` shows entry N whole, who wrote it
and when, and the person's messages it rests on (its evidence). Only the
person's own files are read. Entry text is shown whole and exactly as stored
(`literal`: no Markdown of it is rendered). Every line is in the person's
language and every date in their time zone (`PersonLocale`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gateway.commands.registry import CommandReply, SessionControl
from gateway.delivery.literal import literal
from gateway.i18n import N_
from memory_core import (
    ArchivedEntry,
    EntryOrigin,
    LedgerChange,
    MemoryBackend,
    MemoryEditError,
    Origin,
    UndoRefusedError,
)

if TYPE_CHECKING:
    from gateway.person_locale import PersonLocale

HISTORY_SHOWN = 20
NO_EVIDENCE_MARK = "†"
"""Follows an entry of /memory that keeps no evidence (explained by `NO_EVIDENCE_LEGEND`)."""
NO_EVIDENCE_LEGEND = N_(
    "† keeps no evidence: written by the operator, by hand, or before evidence was kept. "
    "/memory why N shows what an entry rests on."
)
_UNDO_NUMBER = re.compile(r"#?(?P<digits>[0-9]{1,9})")

ORIGIN_LABELS = {
    "person": N_("you"),
    "review": N_("learned in the background (review)"),
    "extraction": N_("learned in the background (end of a conversation)"),
    "operator": N_("the operator"),
    "admin": N_("an admin"),
    "withdrawn": N_("withdrawn: source edited"),
}
"""Who wrote an entry, by `Origin.kind`: copies of memory_core's English labels (it cannot
mark them for the catalogs), translated where shown."""

UNDO_REFUSALS = (
    N_("There is no change left to undo."),
    N_("There is no change {change_id} in the history."),
    N_("Change {change_id} is itself an undo (of change {undoes}); it can't be undone."),
    N_("Change {change_id} was already undone (by change {by})."),
    N_(
        "Change {change_id} can't be undone: change {later} changed the same entry later "
        "(undo that one first)."
    ),
    N_(
        "Change {change_id} can't be undone: the entry it wrote is no longer there as it left "
        "it (changed by hand?)."
    ),
    N_("Change {change_id} has nothing to undo."),
    N_("Change {change_id} can't be undone: that entry is already there again."),
    N_("Change {change_id} can't be undone: the archive lost it."),
    N_(
        "Change {change_id} can't be undone: it no longer fits (the memory would be at "
        "{chars}/{limit} characters); remove an entry first."
    ),
    N_(
        "Change {change_id} can't be undone: it was about an entry you asked me to forget, "
        "and that is for good."
    ),
)
"""Copies of `UndoRefusedError`'s templates (memory_core's `UNDO_REFUSALS`; it cannot mark
them), so that the catalogs hold them and a refusal is shown in the person's language."""


def usage(locale: PersonLocale, chars: int, limit: int) -> str:
    """How full a memory file is: ``67% — 1,474/2,200 chars`` (percent floored, at most 100)."""
    percent = min(100, chars * 100 // limit) if limit > 0 else 100
    return locale._(
        "{percent}% — {chars}/{limit} chars",
        percent=percent,
        chars=format(chars, ","),
        limit=format(limit, ","),
    )


def origin_label(locale: PersonLocale, origin: Origin) -> str:
    """Who wrote it, in the person's words: "you", "the operator", …"""
    label = ORIGIN_LABELS.get(origin.kind)
    return locale._(label) if label is not None else origin.label()


def when(locale: PersonLocale, at: float | None) -> str:
    """The person's day of `at` ("2026-03-14"), or that the entry was written by hand."""
    if at is None:
        return locale._("edited by hand on disk")
    return locale.day(at)


def entry_lines(
    locale: PersonLocale, origins: Sequence[EntryOrigin], mark: bool = False
) -> list[str]:
    """The entries numbered from 1, each whole and followed by who wrote it and when;
    with `mark`, those keeping no evidence end with `NO_EVIDENCE_MARK`."""
    return [
        locale._(
            "{number}. {text} ({origin}, {when})",
            number=i,
            text=literal(o.text),
            origin=origin_label(locale, o.origin),
            when=when(locale, o.at),
        )
        + (f" {NO_EVIDENCE_MARK}" if mark and not o.evidence else "")
        for i, o in enumerate(origins, start=1)
    ]


def why_text(locale: PersonLocale, number: int, entry: EntryOrigin) -> str:
    """The reply to /memory why N: entry N whole, who wrote it and when, and its evidence."""
    lines = [
        locale._("Entry {number}, as I keep it:", number=number),
        literal(entry.text),
        locale._(
            "Written by {origin} ({when}).",
            origin=origin_label(locale, entry.origin),
            when=when(locale, entry.at),
        ),
    ]
    if not entry.evidence:
        lines.append(_no_evidence(locale, entry))
        return "\n".join(lines)
    lines.append(locale._("It rests on these words of yours:"))
    lines += [
        locale._("- “{span}” (message {id})", span=literal(e.span), id=e.message_id)
        for e in entry.evidence
    ]
    return "\n".join(lines)


def _no_evidence(locale: PersonLocale, entry: EntryOrigin) -> str:
    if entry.at is None:
        return locale._("No evidence: it was written by hand on disk.")
    if entry.origin.kind in ("operator", "admin"):
        return locale._(
            "No evidence: it was written by {origin}.", origin=origin_label(locale, entry.origin)
        )
    return locale._("No evidence: it was written before evidence was kept.")


def history_text(locale: PersonLocale, changes: Sequence[LedgerChange]) -> str:
    """The reply to /memory history: newest first, each numbered by its id."""
    if not changes:
        return locale._("No changes to what I remember about you are recorded yet.")
    lines = [locale._("The latest changes to what I remember about you, newest first:")]
    for change in changes:
        lines.append(
            locale._(
                "#{id} {moment} · {change} ({origin})",
                id=change.id,
                moment=locale.moment(change.at),
                change=describe(locale, change),
                origin=origin_label(locale, change.origin),
            )
        )
    lines.append(locale._("Send /memory undo to revert the latest, /memory undo N a given one."))
    return "\n".join(lines)


def describe(locale: PersonLocale, change: LedgerChange) -> str:
    """One change in a few words: ``added “…”``, ``replaced “…” with “…”``, …"""
    before, after = _quoted(change.before), _quoted(change.after)
    if change.action == "forget":
        return locale._("forgot an entry for good")
    if change.action == "forgotten":
        return locale._("a change to an entry since forgotten")
    if change.action == "undo":
        return locale._(
            "undid #{id}: {effect}", id=change.undoes, effect=undo_effect(locale, change)
        )
    if change.action == "add":
        return locale._("added {after}", after=after)
    if change.action == "remove":
        return locale._("removed {before}", before=before)
    if change.action == "archive":
        return locale._("moved {before} to the archive to make room", before=before)
    if change.action == "consolidate":
        return locale._("merged {before} into {after}", before=before, after=after)
    return locale._("replaced {before} with {after}", before=before, after=after)


def archive_text(locale: PersonLocale, archived: Sequence[ArchivedEntry]) -> str:
    """The reply to /memory archive: the moved entries, newest first."""
    if not archived:
        return locale._("Nothing of yours was moved to the archive.")
    lines = [
        locale._("Moved out of a full memory to make room (newest first); /recall searches them:")
    ]
    for item in reversed(archived):
        lines.append(
            locale._(
                "- {text}\n  ({origin}; archived {day} by change #{id}: /memory undo {id} "
                "brings it back)",
                text=literal(item.text),
                origin=origin_label(locale, item.origin),
                day=when(locale, item.at),
                id=item.change_id,
            )
        )
    return "\n".join(lines)


async def undo(
    locale: PersonLocale,
    memory: MemoryBackend,
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
                locale._(
                    "Send /memory undo to revert the latest change, or /memory undo N with a "
                    "number from /memory history; nothing was changed."
                )
            )
        change_id = int(number["digits"])
    try:
        result = memory.undo("user", user_key, change_id, Origin("person"))
    except UndoRefusedError as exc:
        return CommandReply(locale._(exc.template, **exc.values))
    except MemoryEditError as exc:  # any other refusal of the restored text
        return CommandReply(
            locale._("I couldn't undo that, so nothing changed: {reason}", reason=str(exc))
        )
    if sessions is not None:
        await sessions.refresh_prompts(user_key)  # no stored prompt may keep the old text
    if discard_export is not None:
        discard_export(user_key)
    done = "; ".join(undo_effect(locale, c) for c in result.made)  # "#N" is said once
    return CommandReply(
        locale._(
            "Undone #{id}: {done}.",
            id=result.undone.id,
            done=done or locale._("nothing left to change"),
        )
    )


def undo_effect(locale: PersonLocale, change: LedgerChange) -> str:
    """What an undo change did to its entry: "brought back “…”", "removed “…”", …"""
    before, after = _quoted(change.before), _quoted(change.after)
    if change.before is None:
        return locale._("brought back {after}", after=after)
    if change.after is None:
        return locale._("removed {before}", before=before)
    return locale._("changed {before} back to {after}", before=before, after=after)


def _quoted(text: str | None) -> str:
    """An entry in quotes, whole and as stored."""
    return "" if text is None else f"“{literal(text)}”"

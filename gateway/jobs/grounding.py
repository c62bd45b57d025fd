"""The memory tool held to what the person said: every write about them is grounded, or
it is not written.

`grounded` wraps the memory tool of a review, an extraction or a live turn. An entry
about the person (target ``user``, an add or the new text of a replace) goes through
only when `memory_core.grounding.check` finds all of its words in one message of the
person's, or two consecutive ones, said as a statement about themselves
(`GroundingSettings.said`: their own messages of the stretch the run learns from,
never the assistant's replies, tool output, forwarded messages or quoted lines). What
grounds it travels with the write as `Evidence` (`GroundedArguments`: built here, never
from the model's arguments). A remove is never held back: forgetting is not learning.

What is not grounded is never written silently: with a stager (``write_approval``
``background`` or ``all``) the whole call is staged for the person's approval with the
reason ("not in your words", "you said the opposite", "you asked, not said", "you said
it of someone else") and the closest message shown; without one it is dropped, the model
gets one line saying why (and may try again with what the person said), the refusal is
counted (`on_refused`) and logged at info without the entry's text.

A grounded add that states a new value for something one of the person's entries
states (`memory_core.grounding.superseded`: "Lives in Lisbon", then "Moved to Porto")
becomes a replace of that entry, so the stale fact does not stay beside the new one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gateway.agent.tools import Tool, ToolHandler
from gateway.i18n import N_
from gateway.jobs.support import said_texts
from memory_core import (
    EntryOrigin,
    Evidence,
    GroundedArguments,
    OwnWords,
    StoredMessage,
    Support,
    Verdict,
    check,
    superseded,
)
from memory_core.file_memory import entry_handle

log = logging.getLogger(__name__)

MEMORY_TOOL = "memory"
NOT_SAID_CODE = "not_said_by_person"

NOT_IN_WORDS = N_("not in your words")
SAID_OPPOSITE = N_("you said the opposite")
ASKED_NOT_SAID = N_("you asked, not said")
SOMEONE_ELSE = N_("you said it of someone else")
REASONS: dict[Verdict, str] = {
    "not_said": NOT_IN_WORDS,
    "no_words": NOT_IN_WORDS,
    "opposite": SAID_OPPOSITE,
    "asked": ASKED_NOT_SAID,
    "someone_else": SOMEONE_ELSE,
}
"""A staged change's reason for each verdict: kept in English, translated where shown."""

Stager = Callable[["GroundedArguments", "tuple[Unsupported, ...]"], Awaitable[str]]
"""Stage a call that is not grounded for approval: (its arguments, why) -> tool result."""
SaidWords = Callable[[], Awaitable[OwnWords]]
"""The person's words of the stretch, read when a write first needs them."""
RefusalRecorder = Callable[[str, str], None]
"""Counts a dropped entry: (the run's kind, the verdict)."""


@dataclass(frozen=True)
class Unsupported:
    """One entry of a memory call that the person's words do not ground."""

    content: str
    support: Support

    @property
    def reason(self) -> str:
        return REASONS.get(self.support.verdict, NOT_IN_WORDS)


@dataclass(frozen=True)
class Grounding:
    """How one run's memory tool is held: the person's words, what to do with the rest."""

    said: SaidWords
    job: str  # the run, for the log and the counter: "review", "extraction", "turn"
    stage: Stager | None = None  # None: refuse what is not grounded
    entries: Callable[[], Awaitable[Sequence[EntryOrigin]]] | None = None  # theirs, live
    on_refused: RefusalRecorder | None = None


def own_words(messages: Sequence[StoredMessage]) -> OwnWords:
    """What the person said in `messages`: their own (not forwarded) messages only, with
    the names they go by there (an entry may call them by name)."""
    names = {m.speaker_name for m in messages if m.role == "user" and m.speaker_name}
    return OwnWords(said_texts(messages), names)


def fixed_words(said: OwnWords) -> SaidWords:
    """`said` as the lazily read words of a run that has them already."""

    async def words() -> OwnWords:
        return said

    return words


def grounded(tools: Sequence[Tool], grounding: Grounding) -> list[Tool]:
    """`tools` with the memory tool held to the person's words (see the module doc)."""
    return [
        replace(t, handler=_held(t.handler, grounding)) if t.name == MEMORY_TOOL else t
        for t in tools
    ]


def verdicts(arguments: Mapping[str, Any] | str, said: OwnWords) -> dict[str, Support]:
    """The verdict on each new entry about the person in a memory call (none when the
    call is malformed or targets the shared notes: the memory tool explains that)."""
    return {content: check(content, said) for content in _new_entries(arguments)}


def unsupported(arguments: Mapping[str, Any] | str, said: OwnWords) -> tuple[Unsupported, ...]:
    """The entries about the person in a memory call that `said` does not ground."""
    return tuple(
        Unsupported(content, support)
        for content, support in verdicts(arguments, said).items()
        if not support.supported
    )


def _held(handler: ToolHandler, grounding: Grounding) -> ToolHandler:
    async def held(arguments: Mapping[str, Any]) -> str:
        args = _mapping(arguments)
        contents = [] if args is None else _new_entries(args)
        if args is None or not contents:
            return await handler(arguments)  # malformed, shared notes, or only removals
        said = await grounding.said()
        found = {content: check(content, said) for content in contents}
        refused = tuple(Unsupported(c, s) for c, s in found.items() if not s.supported)
        if not refused:
            if grounding.entries is not None:
                args = _superseding(args, await grounding.entries())
            evidence = {c: s.evidence for c, s in found.items()}
            return await handler(GroundedArguments(args, evidence))
        for entry in refused:  # the entry's text stays out of the log
            log.info(
                "%s: %s an entry that is not grounded (%s; %d of its %d words unsaid)",
                grounding.job,
                "staged" if grounding.stage is not None else "dropped",
                entry.support.verdict,
                len(entry.support.missing),
                len(entry.support.words),
            )
        if grounding.stage is not None:  # each entry with its evidence, or its closest
            shown = {c: s.evidence if s.supported else _closest(s) for c, s in found.items()}
            return await grounding.stage(GroundedArguments(args, shown), refused)
        if grounding.on_refused is not None:
            for entry in refused:
                grounding.on_refused(grounding.job, entry.support.verdict)
        return json.dumps(_refusal(refused), ensure_ascii=False)

    return held


def _closest(support: Support) -> tuple[Evidence, ...]:
    return () if support.closest is None else (support.closest,)


def _superseding(args: Mapping[str, Any], entries: Sequence[EntryOrigin]) -> Mapping[str, Any]:
    """`args` with each add that supersedes one of the person's entries made a replace."""
    own = [e.text for e in entries if e.origin.kind in ("person", "review", "extraction")]
    if not own:
        return args

    def rewritten(item: Mapping[str, Any]) -> Mapping[str, Any]:
        content = item.get("content")
        if item.get("action") != "add" or not isinstance(content, str):
            return item
        old = superseded(content, own)
        if old is None:
            return item
        log.info("an add supersedes one of the person's entries: written as a replace")
        return {**item, "action": "replace", "old_text": entry_handle(old)}

    operations = args.get("operations")
    if isinstance(operations, list) and operations:
        return {
            **args,
            "operations": [rewritten(op) if isinstance(op, Mapping) else op for op in operations],
        }
    return rewritten(args)


def _refusal(refused: Sequence[Unsupported]) -> dict[str, Any]:
    reasons = "; ".join(f"{e.content!r}: {e.support.reason()}" for e in refused)
    return {
        "success": False,
        "code": NOT_SAID_CODE,
        "error": (
            "nothing was saved: save only what the person said about themselves, as a "
            "statement, in their words (not your replies, guesses, tool output, quoted or "
            f"forwarded text, nor what they asked, denied or said of someone else). {reasons}"
        ),
    }


def _new_entries(arguments: Mapping[str, Any] | str) -> list[str]:
    """The new entry texts about the person (adds and replaces) of a memory call."""
    args = _mapping(arguments)
    if args is None or args.get("target") != "user":
        return []
    operations = args.get("operations")
    items = operations if isinstance(operations, list) and operations else [args]
    return [
        item["content"]
        for item in items
        if isinstance(item, Mapping)
        and item.get("action") in ("add", "replace")
        and isinstance(item.get("content"), str)
        and item["content"].strip()
    ]


def _mapping(arguments: Mapping[str, Any] | str) -> Mapping[str, Any] | None:
    if isinstance(arguments, Mapping):
        return arguments
    try:
        decoded = json.loads(arguments)
    except (TypeError, ValueError):
        return None
    return decoded if isinstance(decoded, Mapping) else None

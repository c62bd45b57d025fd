"""The `memory` tool: the model's (and the operator CLI's) way to edit file memory.

A `MemoryTool` is bound to one caller: their user key and whether they are an
admin (or the operator). Personal facts go to that caller's own USER.md; the
shared MEMORY.md is writable only by admins. `execute()` takes a typed
`MemoryRequest` and returns a `WriteResult` or raises a typed error; `handle()`
parses the model's arguments, runs `execute()` and turns the outcome into the
JSON string the model sees. Three refused calls in one turn make the result
terminal ("stop and answer"); any success, and `start_turn()`, reset the count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memory_core.errors import (
    AmbiguousMatchError,
    AtomicWriteError,
    BatchRejectedError,
    EntryTooLongError,
    InvalidArgumentsError,
    InvalidEntryError,
    InvalidUserKeyError,
    MemoryCoreError,
    MemoryDriftError,
    MemoryEditError,
    MemoryFileError,
    MemoryLockError,
    MemoryPermissionError,
    MissingOldTextError,
    NoMatchError,
    OverBudgetError,
    UnreadableMemoryError,
    UnsafeContentError,
)
from memory_core.file_memory.approval import Approval
from memory_core.file_memory.backend import MemoryBackend
from memory_core.file_memory.edits import ACTIONS, Operation
from memory_core.file_memory.entries import usage
from memory_core.file_memory.origin import OPERATOR, Evidence, Origin
from memory_core.file_memory.pending import StagedChange
from memory_core.file_memory.render import safe_view, usage_label
from memory_core.file_memory.store import TARGETS, Target, WriteResult
from memory_core.tool_args import decode_arguments

MAX_FAILURES_PER_TURN = 3

MEMORY_TOOL_DESCRIPTION = (
    "Save durable facts to persistent memory. Write facts, not commands: "
    "'User likes short answers' (when they said they like them), never 'Always answer "
    "briefly' - entries are read back "
    "into your prompt in later sessions. target 'user' is the profile of the person you are "
    "talking to (who they are, their preferences, their corrections), kept only when their "
    "own words in this conversation state it: write it in their words, never your guesses, "
    "what they asked or denied, or what they said of someone else; target 'memory' holds "
    "shared notes about this deployment and its environment (admins only). Save proactively, "
    "in this order of priority: preferences and corrections, then environment facts, then "
    "stable conventions. Skip trivia, task progress and to-do items (past conversations are "
    "searchable with session_search); procedures belong in skills, not memory. Do every change "
    "in one call: use 'operations' for several edits; they apply all-or-nothing and the budget "
    "is checked on the final state, so you can remove or shorten entries and add in one call. "
    "old_text is a short unique part of the entry to replace or remove. When memory is full, "
    "consolidate: merge related entries with replace, drop stale ones with remove."
)

_OPERATION_PROPERTIES: dict[str, Any] = {
    "action": {"type": "string", "enum": list(ACTIONS), "description": "What to do."},
    "content": {
        "type": "string",
        "description": "The entry text, a fact (for add and replace).",
    },
    "old_text": {
        "type": "string",
        "description": "A short unique part of the entry to change (for replace and remove).",
    },
}

MEMORY_TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "memory",
        "description": MEMORY_TOOL_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                "target": {
                    "type": "string",
                    "enum": list(TARGETS),
                    "description": "'user': this person's profile; 'memory': shared notes.",
                },
                **_OPERATION_PROPERTIES,
                "operations": {
                    "type": "array",
                    "description": "Several edits applied together, all or nothing.",
                    "items": {
                        "type": "object",
                        "properties": _OPERATION_PROPERTIES,
                        "required": ["action"],
                    },
                },
            },
            "required": ["target"],
        },
    },
}


@dataclass(frozen=True)
class MemoryChange:
    """One operation that changed a memory file, for the background review's summary line."""

    target: Target
    action: str  # add, replace or remove
    content: str | None  # the new entry (add, replace)
    old_text: str | None  # what identified the changed entry (replace, remove)


class GroundedArguments(dict[str, Any]):
    """A memory call's arguments with the evidence the grounding check found for each new
    entry (by its content as the model wrote it). Built by the code that checked the
    call, never decoded from the model's JSON, so the model cannot claim evidence."""

    def __init__(
        self, arguments: Mapping[str, Any], evidence: Mapping[str, tuple[Evidence, ...]]
    ) -> None:
        super().__init__(arguments)
        self.evidence = dict(evidence)


@dataclass(frozen=True)
class MemoryRequest:
    """A validated tool call: one target and one or more operations."""

    target: Target
    operations: tuple[Operation, ...]


class MemoryTool:
    """The memory tool for one caller: `user_key` (None: no profile) and admin rights."""

    def __init__(
        self,
        store: MemoryBackend,
        user_key: str | None,
        *,
        is_admin: bool,
        max_failures: int = MAX_FAILURES_PER_TURN,
        origin: Origin = OPERATOR,
        approval: Approval | None = None,
    ) -> None:
        """`origin`: who the changes are recorded as made by (see `MemoryBackend.apply`);
        `approval`: which USER.md writes wait for the person's approval (None: none wait)."""
        self._store = store
        self._approval = approval
        self._origin = origin
        self._user_key = user_key
        self._is_admin = is_admin
        self._max_failures = max_failures
        self._failures = 0
        self._changes: list[MemoryChange] = []

    @property
    def changes(self) -> tuple[MemoryChange, ...]:
        """The operations that changed a file through this object, in order."""
        return tuple(self._changes)

    @property
    def failures_this_turn(self) -> int:
        return self._failures

    def start_turn(self) -> None:
        """A new user turn: forget the refusals of the previous one."""
        self._failures = 0

    def execute(self, request: MemoryRequest) -> WriteResult:
        """Apply the request for this caller, or raise the reason it is refused."""
        if request.target == "memory" and not self._is_admin:
            raise MemoryPermissionError(
                "only admins can write the shared notes (target 'memory'); save facts about "
                "this user with target 'user'"
            )
        if request.target == "user" and self._user_key is None:
            raise MemoryPermissionError("there is no user profile for this caller")
        origin = self._origin
        if request.target == "memory" and origin.kind == "person":
            # A person writing the shared notes does so as an admin, and is named.
            origin = Origin("admin", origin.session_id, by=self._user_key)
        return self._store.apply(request.target, self._user_key, request.operations, origin)

    def handle(self, arguments: Mapping[str, Any] | str) -> str:
        """Run one tool call from the model and return the JSON result it sees."""
        try:
            request = parse_request(arguments)
            if isinstance(arguments, GroundedArguments):
                request = _with_evidence(request, arguments.evidence)
            staged = self._stage(request)
            result = None if staged else self.execute(request)
        except MemoryCoreError as exc:
            self._failures += 1
            return _dumps(self._error_payload(exc))
        self._failures = 0
        if result is None:
            return _dumps(_staged_payload(staged))
        for op, note in zip(request.operations, result.notes, strict=True):
            if note != "already exists":
                self._changes.append(
                    MemoryChange(request.target, op.action, op.content, op.old_text)
                )
        return _dumps(_success_payload(request, result))

    def _stage(self, request: MemoryRequest) -> tuple[StagedChange, ...]:
        """Stage `request` when its writes must wait for the person's approval."""
        approval = self._approval
        if approval is None or request.target != "user" or self._user_key is None:
            return ()
        entries = self._store.read("user", self._user_key).entries
        proposals = approval.proposals(entries, request.operations, self._origin)
        return approval.stage(self._user_key, proposals, self._origin) if proposals else ()

    def _error_payload(self, exc: MemoryCoreError) -> dict[str, Any]:
        cause = exc.cause if isinstance(exc, BatchRejectedError) else exc
        payload: dict[str, Any] = {"success": False, "code": _code(cause), "error": str(exc)}
        payload.update(_error_details(cause))
        if isinstance(exc, BatchRejectedError):
            payload["failed_operation"] = exc.index + 1
        payload["failures_this_turn"] = self._failures
        if self._failures >= self._max_failures:
            payload["done"] = True
            payload["stop"] = (
                f"{self._failures} memory writes failed in this turn. Stop calling the memory "
                "tool now and answer the user; tell them the memory could not be saved."
            )
        return payload


def parse_request(arguments: Mapping[str, Any] | str) -> MemoryRequest:
    """Validate the model's arguments into a `MemoryRequest`."""
    args = _as_mapping(arguments)
    target = args.get("target")
    if target not in TARGETS:
        raise InvalidArgumentsError(f"target must be 'memory' or 'user' (got {target!r})")
    operations = args.get("operations")
    if operations not in (None, []):
        if args.get("action") is not None:
            raise InvalidArgumentsError(
                "give either action (one edit) or operations (a batch), not both"
            )
        if not isinstance(operations, list):
            raise InvalidArgumentsError("operations must be a list of {action, content, old_text}")
        ops = tuple(_operation(item, f"operations[{i}]") for i, item in enumerate(operations))
    else:
        ops = (_operation(args, "arguments"),)
    return MemoryRequest(target, ops)


def _with_evidence(
    request: MemoryRequest, evidence: Mapping[str, tuple[Evidence, ...]]
) -> MemoryRequest:
    """`request` with each new entry's evidence on its operation."""
    operations = tuple(
        replace(op, evidence=evidence.get(op.content, ())) if op.content is not None else op
        for op in request.operations
    )
    return MemoryRequest(request.target, operations)


def _as_mapping(arguments: Mapping[str, Any] | str) -> Mapping[str, Any]:
    return decode_arguments(arguments, InvalidArgumentsError)


def _operation(item: Any, where: str) -> Operation:
    if not isinstance(item, Mapping):
        raise InvalidArgumentsError(f"{where} must be an object with action, content, old_text")
    action = item.get("action")
    if action not in ACTIONS:
        raise InvalidArgumentsError(
            f"{where}: action must be one of add, replace, remove (got {action!r})"
        )
    fields: dict[str, str | None] = {}
    for name in ("content", "old_text"):
        value = item.get(name)
        if value is not None and not isinstance(value, str):
            raise InvalidArgumentsError(f"{where}: {name} must be a string")
        fields[name] = value
    return Operation(action, content=fields["content"], old_text=fields["old_text"])


_CODES: tuple[tuple[type[MemoryCoreError], str], ...] = (
    (InvalidArgumentsError, "invalid_arguments"),
    (MemoryPermissionError, "permission_denied"),
    (InvalidUserKeyError, "invalid_user_key"),
    (UnsafeContentError, "unsafe_content"),
    (InvalidEntryError, "invalid_entry"),
    (EntryTooLongError, "entry_too_long"),
    (OverBudgetError, "over_budget"),
    (MissingOldTextError, "missing_old_text"),
    (NoMatchError, "no_match"),
    (AmbiguousMatchError, "ambiguous_match"),
    (MemoryEditError, "invalid_operation"),
    (MemoryDriftError, "file_drift"),
    (UnreadableMemoryError, "unreadable_file"),
    (MemoryLockError, "busy"),
    (AtomicWriteError, "write_failed"),
    (MemoryFileError, "file_error"),
)


def _code(exc: MemoryCoreError) -> str:
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    return "error"


def _error_details(exc: MemoryCoreError) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if isinstance(exc, UnsafeContentError):
        details["pattern_id"] = exc.finding.pattern_id
        details["category"] = exc.finding.category
    if isinstance(exc, AmbiguousMatchError):
        details["matches"] = list(exc.candidates)
    if isinstance(exc, OverBudgetError | EntryTooLongError | NoMatchError | MissingOldTextError):
        details["current_entries"] = _visible(exc.entries)
        details["usage"] = usage_label(usage(exc.entries), exc.limit)
    if isinstance(exc, OverBudgetError):
        details["usage_after"] = usage_label(exc.chars_after, exc.limit)
    if isinstance(exc, MemoryDriftError):
        details["backup"] = exc.backup.name
    return details


def _visible(entries: Sequence[str]) -> list[str]:
    return [safe_view(entry) for entry in entries]


_NOTE_MESSAGES = {
    "added": "Entry added.",
    "already exists": "Entry already exists; nothing changed.",
    "replaced": "Entry replaced.",
    "replaced (merged with an identical entry)": "Entry replaced (merged with an identical one).",
    "removed": "Entry removed.",
}


def _success_payload(request: MemoryRequest, result: WriteResult) -> dict[str, Any]:
    if len(result.notes) == 1:
        message = _NOTE_MESSAGES[result.notes[0]]
    else:
        message = f"Batch of {len(result.notes)} operations applied ({', '.join(result.notes)})."
    if result.archived:
        message += (
            f" To make room, {len(result.archived)} older background "
            f"{'entry was' if len(result.archived) == 1 else 'entries were'} moved to the archive."
        )
    return {
        "success": True,
        "done": True,
        "target": request.target,
        "usage": result.state.usage_label,
        "entry_count": len(result.state.entries),
        "message": message,
        "note": (
            "Saved to disk; do not repeat this call."
            if result.changed
            else "Nothing needed saving; do not repeat this call."
        ),
    }


def _staged_payload(staged: Sequence[StagedChange]) -> dict[str, Any]:
    return {
        "success": True,
        "done": True,
        "saved": False,
        "staged": [{"id": c.id, "change": c.describe(), "reason": c.reason} for c in staged],
        "message": (
            "Not saved yet: the change waits for the person's approval "
            f"({staged[0].reason}). Tell them it awaits their approval (/memory pending, "
            f"/memory approve {staged[0].id}), never that it was saved; do not repeat this call."
        ),
    }


def _dumps(payload: Mapping[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False)

"""Who wrote a memory entry: the `Origin` recorded with every change in the ledger.

The origin is given by the code that makes the change (the turn's memory tool,
a background job, the operator's command line), never by the model, so a
planted entry cannot claim to be the person's own words. Kind "withdrawn" is a
removal made because the message that grounded the entry was edited or deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

OriginKind = Literal["person", "review", "extraction", "operator", "admin", "withdrawn"]
ORIGIN_KINDS: tuple[OriginKind, ...] = get_args(OriginKind)

_LABELS: dict[OriginKind, str] = {
    "person": "you",
    "review": "learned in the background (review)",
    "extraction": "learned in the background (end of a conversation)",
    "operator": "the operator",
    "admin": "an admin",
    "withdrawn": "withdrawn: source edited",
}
GROUNDED_KINDS: frozenset[OriginKind] = frozenset({"person", "review", "extraction"})
"""The writers whose entries were grounded in the person's own words."""


@dataclass(frozen=True)
class Origin:
    """The writer of a change: its kind, the session it came from, and the admin's key."""

    kind: OriginKind
    session_id: int | None = None
    by: str | None = None  # the admin's user key (kind "admin")

    def label(self) -> str:
        """A short phrase for the person: "you", "the operator", …"""
        return _LABELS[self.kind]

    def as_json(self) -> dict[str, Any]:
        """The origin as stored in a ledger line."""
        return {"kind": self.kind, "session_id": self.session_id, "by": self.by}

    @classmethod
    def from_json(cls, data: object) -> Origin:
        """The origin of a ledger line; anything unreadable counts as the operator's."""
        if not isinstance(data, dict) or data.get("kind") not in ORIGIN_KINDS:
            return OPERATOR
        session_id = data.get("session_id")
        by = data.get("by")
        return cls(
            data["kind"],
            session_id if isinstance(session_id, int) else None,
            by if isinstance(by, str) else None,
        )


OPERATOR = Origin("operator")

EVIDENCE_SPAN_CHARS = 160


@dataclass(frozen=True)
class Evidence:
    """One message of the person's that grounded an entry: its stored id (state.db or
    PostgreSQL ``messages.id``) and a short span of its text, as said.

    Evidence is computed by the code that checks a write against the person's words,
    never written by the model, and is kept beside the entry's origin."""

    message_id: int
    span: str

    def as_json(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "span": self.span}

    @classmethod
    def from_json(cls, data: object) -> Evidence | None:
        """One evidence item of a stored line; None when it does not read as one."""
        if not isinstance(data, dict):
            return None
        message_id, span = data.get("message_id"), data.get("span")
        if not isinstance(message_id, int) or not isinstance(span, str):
            return None
        return cls(message_id, span[:EVIDENCE_SPAN_CHARS])


def evidence_json(evidence: tuple[Evidence, ...]) -> list[dict[str, Any]]:
    return [e.as_json() for e in evidence]


def evidence_from_json(data: object) -> tuple[Evidence, ...]:
    """The evidence of a stored line (a list of items); unreadable items are skipped."""
    if not isinstance(data, list):
        return ()
    return tuple(e for e in (Evidence.from_json(d) for d in data) if e is not None)

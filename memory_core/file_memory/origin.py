"""Who wrote a memory entry: the `Origin` recorded with every change in the ledger.

The origin is given by the code that makes the change (the turn's memory tool,
a background job, the operator's command line), never by the model, so a
planted entry cannot claim to be the person's own words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

OriginKind = Literal["person", "review", "extraction", "operator", "admin"]
ORIGIN_KINDS: tuple[OriginKind, ...] = get_args(OriginKind)

_LABELS: dict[OriginKind, str] = {
    "person": "you",
    "review": "learned in the background (review)",
    "extraction": "learned in the background (end of a conversation)",
    "operator": "the operator",
    "admin": "an admin",
}


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

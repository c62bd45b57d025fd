"""The data directory's allow list and its pairing codes: access without restarts.

The document `ACCESS_FILE` (`Storage.document`: ``<home>/access.json``, 0600, on
the embedded default; a row of PostgreSQL's ``documents`` table, shared by every
replica, with ``storage.url``) holds the people let in beside the configuration's
`allowed_users`, and the pairing code each refused person was given last.
Every change is read, made and written while the document is held (the file's
``.lock``, or the row locked in one transaction), so the running bot, the other
replicas and ``mnemo users allow|deny`` in another process never lose each
other's changes. The bot reads the document again at decision time when its
signature changed (one ``stat`` or one row read per message), so a change takes
effect on the next message, without a restart.

A code is `CODE_LENGTH` characters from an alphabet without look-alikes (no
0/O, 1/I/L), typed in any case, with or without a dash. It is tied to the one
platform user it was given to, replaces their previous code, expires after
`CODE_TTL` seconds and works once. The file keeps only its SHA-256; logs show
only its first two characters.

A refusal costs the bot almost nothing (`AccessList.current`, `AccessList.issue_once`):
the document is read again and written in a worker thread, never on the event loop,
once for all the refusals that arrive together (`gateway.coalesce`); a person gets a
new code at most once per `CODE_TTL`, across restarts and replicas (each code's
expiry, so its issue time, is in the document, and the bot remembers them from its
last read), and the document is written only when a code is new.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from gateway.coalesce import Coalesced
from gateway.errors import AccessListError
from gateway.i18n import N_
from memory_core import Document, DocumentError

log = logging.getLogger(__name__)

ACCESS_FILE = "access.json"
ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read aloud or typed safely
CODE_LENGTH = 8
CODE_TTL = 3600.0  # seconds a pairing code stays valid
MAX_CODES = 1000  # codes kept at once; the oldest go first (a flood of refused accounts)
_ID = re.compile(r"[0-9]{1,32}")

# Refusals of a code, shown to the admin who sent /allow in their language (the CLI's
# `mnemo users allow` prints the English line).
NOT_A_CODE = N_("{code} is not a pairing code ({length} letters and digits, as the bot sent it)")
UNKNOWN_CODE = N_("pairing code {code} is unknown or already used")
EXPIRED_CODE = N_(
    "pairing code {code} has expired; the person gets a new one when they write to the bot "
    "again (within the hour: their id works too)"
)

T = TypeVar("T")


@dataclass(frozen=True)
class Grant:
    """A person on the data directory's list: a platform and their user id there."""

    platform: str
    user_id: str

    def __str__(self) -> str:
        return f"{self.platform} user {self.user_id}"


@dataclass
class _Code:
    grant: Grant
    digest: str
    expires: float


@dataclass
class _State:
    allowed: dict[str, set[str]]
    codes: list[_Code]


def normalize_code(text: str) -> str:
    """`text` as a code is stored: upper case, without spaces or dashes; `AccessListError`
    when it cannot be a pairing code at all."""
    code = re.sub(r"[\s-]", "", text).upper()
    if len(code) != CODE_LENGTH or any(c not in ALPHABET for c in code):
        raise AccessListError(NOT_A_CODE, code=shown_code(code), length=CODE_LENGTH)
    return code


def shown_code(code: str) -> str:
    """The part of a code that may appear in logs and error lines."""
    return f"{code[:2]}…" if code else "an empty code"


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode("ascii")).hexdigest()


class AccessList:
    """The people let in beside the configuration (`document`, `ACCESS_FILE` of the
    storage), and the pairing codes given to refused people; `clock` is wall time
    (codes outlive a process)."""

    def __init__(self, document: Document, clock: Callable[[], float] = time.time) -> None:
        self.document = document
        self._clock = clock
        self._signature: object = _UNREAD
        self._allowed: dict[str, frozenset[str]] = {}
        self._issued: dict[Grant, float] = {}  # whose code the last read holds: issued when
        self._issuing: set[Grant] = set()  # codes being written now (`issue_once`)
        self._refreshes: Coalesced[None, None] = Coalesced(lambda _: self._refresh())
        self._writes: Coalesced[tuple[Grant, str], None] = Coalesced(self._issue)

    def granted(self, platform: str) -> frozenset[str]:
        """The user ids of `platform` on the list as the document is now (read again when
        it changed). An unreadable document keeps the last list read, with a warning."""
        self._refresh()
        return self._allowed.get(platform, frozenset())

    async def current(self, platform: str) -> frozenset[str]:
        """`granted`, the document's signature checked (and the document read) in a worker
        thread, once for every caller waiting at the same time."""
        await self._refreshes.submit(None)
        return self._allowed.get(platform, frozenset())

    def _refresh(self) -> None:
        try:
            signature = _checked(self.document.signature)
            if signature != self._signature:
                self._signature = signature  # a bad document is warned about once per change
                state = self._read()
                self._allowed = {p: frozenset(ids) for p, ids in state.allowed.items()}
                self._issued = {c.grant: c.expires - CODE_TTL for c in state.codes}
        except AccessListError as exc:
            log.warning("%s; keeping the access list read before", exc)

    async def issue_once(self, platform: str, user_id: str) -> str | None:
        """A new code for this person, written (off the event loop, with the others asked
        for meanwhile) before it is returned; None when the list read last holds one
        issued less than `CODE_TTL` ago (by this process before a restart, or a replica):
        that one still works. `AccessListError` when the document cannot be written."""
        grant = Grant(platform, user_id)
        await self._refreshes.submit(None)
        issued = self._issued.get(grant)
        if grant in self._issuing or (issued is not None and self._clock() - issued < CODE_TTL):
            return None
        code = new_code()
        self._issuing.add(grant)
        try:
            await self._writes.submit((grant, code))
        finally:
            self._issuing.discard(grant)
        log.info("pairing code %s given to %s", shown_code(code), grant)
        return code

    def entries(self) -> list[Grant]:
        """Everyone on the list, by platform and id."""
        state = self._read()
        return [Grant(p, uid) for p in sorted(state.allowed) for uid in sorted(state.allowed[p])]

    def issue_code(self, platform: str, user_id: str) -> str:
        """A new code for this person (their previous one stops working)."""
        code = new_code()
        grant = Grant(platform, user_id)
        self._issue([(grant, code)])
        log.info("pairing code %s given to %s", shown_code(code), grant)
        return code

    def _issue(self, issued: list[tuple[Grant, str]]) -> None:
        """Write these codes, each replacing its person's previous one: one write."""
        latest = dict(issued)  # a person asking twice in one batch keeps the last code

        def change(state: _State) -> None:
            expires = self._clock() + CODE_TTL
            state.codes = [c for c in state.codes if c.grant not in latest]
            state.codes += [_Code(g, _digest(code), expires) for g, code in latest.items()]
            del state.codes[:-MAX_CODES]

        self._change(change)

    def redeem(self, text: str) -> Grant:
        """Let in the person `text` (a pairing code) was given to, and use the code up;
        `AccessListError` in one line for a code that is malformed, unknown, used or
        expired (nothing changes then)."""
        code = normalize_code(text)
        digest = _digest(code)

        def change(state: _State) -> Grant:
            found = next((c for c in state.codes if secrets.compare_digest(c.digest, digest)), None)
            if found is None:
                raise AccessListError(UNKNOWN_CODE, code=shown_code(code))
            state.codes.remove(found)
            if found.expires <= self._clock():
                raise AccessListError(EXPIRED_CODE, code=shown_code(code))
            state.allowed.setdefault(found.grant.platform, set()).add(found.grant.user_id)
            return found.grant

        try:
            grant = self._change(change)
        except AccessListError:
            log.info("pairing code %s refused", shown_code(code))
            raise
        log.info("pairing code %s let in %s", shown_code(code), grant)
        return grant

    def allow(self, grant: Grant) -> bool:
        """Put `grant` on the list (their pending code goes); False if they were on it."""

        def change(state: _State) -> bool:
            state.codes = [c for c in state.codes if c.grant != grant]
            ids = state.allowed.setdefault(grant.platform, set())
            added = grant.user_id not in ids
            ids.add(grant.user_id)
            return added

        return self._change(change)

    def deny(self, grant: Grant) -> bool:
        """Take `grant` off the list (and drop their pending code); False if not on it."""

        def change(state: _State) -> bool:
            state.codes = [c for c in state.codes if c.grant != grant]
            ids = state.allowed.get(grant.platform, set())
            removed = grant.user_id in ids
            ids.discard(grant.user_id)
            if not ids:
                state.allowed.pop(grant.platform, None)
            return removed

        return self._change(change)

    def _change(self, change: Callable[[_State], T]) -> T:
        """Read, apply `change`, write: all while the document is held. A change that
        refuses writes nothing unless it changed the state first (a used-up expired
        code); the refusal is raised once that is kept."""
        refused: AccessListError | None = None
        try:
            with self.document.changing() as handle:
                state = self._parse(handle.read())
                before = _dump(state)
                try:
                    result = change(state)
                except AccessListError as exc:
                    refused = exc
                self._prune(state)
                if _dump(state) != before:
                    handle.write(_dump(state) + "\n")
        except DocumentError as exc:
            raise AccessListError(str(exc)) from exc
        if refused is not None:
            raise refused
        return result

    def _prune(self, state: _State) -> None:
        now = self._clock()
        state.codes = [c for c in state.codes if c.expires > now - CODE_TTL]  # an hour late:
        # still told "expired", not "unknown"

    def _read(self) -> _State:
        return self._parse(_checked(self.document.read))

    def _parse(self, text: str | None) -> _State:
        if text is None:
            return _State({}, [])
        try:
            return _parse(json.loads(text))
        except (ValueError, TypeError, KeyError) as exc:
            raise AccessListError(
                f"{self.document.label} is not a valid access list ({exc}); fix or remove it"
            ) from exc


_UNREAD = object()  # the signature before the first read: differs from any document's


def _checked(read: Callable[[], T]) -> T:
    """`read()`, its `DocumentError` as the `AccessListError` of the same line."""
    try:
        return read()
    except DocumentError as exc:
        raise AccessListError(str(exc)) from exc


def _parse(raw: Any) -> _State:
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    allowed: dict[str, set[str]] = {}
    for platform, ids in dict(raw.get("allowed", {})).items():
        if not isinstance(ids, list) or not all(
            isinstance(i, str) and _ID.fullmatch(i) for i in ids
        ):
            raise ValueError(f"allowed.{platform} must be a list of numeric ids as strings")
        allowed[str(platform)] = set(ids)
    codes = [
        _Code(Grant(str(c["platform"]), str(c["user_id"])), str(c["sha256"]), float(c["expires"]))
        for c in list(raw.get("codes", []))
    ]
    return _State(allowed, codes)


def _dump(state: _State) -> str:
    payload = {
        "allowed": {p: sorted(ids) for p, ids in sorted(state.allowed.items()) if ids},
        "codes": [
            {
                "platform": c.grant.platform,
                "user_id": c.grant.user_id,
                "sha256": c.digest,
                "expires": c.expires,
            }
            for c in state.codes
        ],
    }
    return json.dumps(payload, indent=1)


def parse_grant(text: str) -> Grant:
    """``telegram:123`` or ``telegram-123`` (a user key) as a `Grant`; `AccessListError`
    in one line otherwise."""
    match = re.fullmatch(r"(telegram|discord)[:-]([0-9]{1,32})", text.strip())
    if match is None:
        raise AccessListError(
            f"{text!r} is not a person: write platform:id (telegram:123, discord:456), "
            "the id the bot told them"
        )
    return Grant(match.group(1), match.group(2))

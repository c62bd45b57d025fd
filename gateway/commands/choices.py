"""Pending choices: the options a command offered a person, until one is picked.

A reply's `Choice` carries an opaque payload, ``choice:<token>``, where the
token is 128 random bits naming an entry in a server-side table. The entry
records whom the choice was offered to, the command, the value picked, the
version of the data it was offered against, and when it expires. A payload is
honoured once, only for that person, only before it expires: a forged token is
unknown, a replayed one is used up, and one pressed by someone else is refused
without spending it. The options offered together are one list, and picking one
spends the whole list. Each list is offered under a key: a new list withdraws the
person's older list under the same key only, so the lists of commands (all under
the default key, one at a time) leave an approval batch's buttons (a key of its
own, `PendingChoices.offer`) standing, and those stay single-use. A person holds
at most `MAX_LISTS` lists (the oldest goes first); erasing a person withdraws
all of theirs (`withdraw`).

The table is this process's (SQLite: one process), or, for replicas on one
PostgreSQL, the shared document ``choices.json`` (`PendingChoices.over`), so a
button offered by one replica may be pressed through another: there the
expiry is wall-clock time, tokens are kept only as SHA-256 digests (a copy of
the row presses no button), and expired lists are purged at every change.

Platforms without buttons answer by number: ``/forget #2`` picks option 2 of
the person's latest list for that command, through the same table and checks.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gateway.commands.registry import PendingChoice
from gateway.errors import ChoiceRefusedError
from gateway.i18n import N_
from gateway.messages import CHOICE_PREFIX, Choice
from gateway.shared_state import Documents, SharedJson, token_digest
from memory_core import Document

log = logging.getLogger(__name__)

DEFAULT_TTL = 600.0  # ten minutes, like `/forget all confirm`
CHOICES_DOCUMENT = "choices.json"  # the replicas' shared table
COMMAND_LIST = ""  # the key of the lists commands offer: a new one replaces the last
MAX_LISTS = 16  # lists one person holds at once (approval batches of a busy week)

T = TypeVar("T")


@dataclass(frozen=True)
class _Offer:
    """One list offered to a person: its key, command and tokens (digests)."""

    key: str
    command: str
    tokens: tuple[str, ...]


@dataclass
class _Table:
    """The pending choices by token digest, and each person's lists, oldest first."""

    by_token: dict[str, PendingChoice] = field(default_factory=dict)
    offers: dict[str, list[_Offer]] = field(default_factory=dict)  # owner -> their lists

    def add(self, owner: str, offer: _Offer) -> None:
        """Hold `offer`, withdrawing the owner's list under its key (and the oldest past
        `MAX_LISTS`)."""
        self.withdraw(owner, offer.key)
        lists = self.offers.setdefault(owner, [])
        lists.append(offer)
        while len(lists) > MAX_LISTS:
            self._drop(lists.pop(0))

    def withdraw(self, owner: str, key: str | None = None, command: str | None = None) -> None:
        """Drop the owner's list under `key`, or their lists of `command` (None: all)."""
        lists = self.offers.get(owner, [])
        chosen = [o for o in lists if key in (None, o.key) and command in (None, o.command)]
        for offer in chosen:
            lists.remove(offer)
            self._drop(offer)
        if not lists:
            self.offers.pop(owner, None)

    def list_of(self, owner: str, digest: str) -> _Offer | None:
        """The list of `owner`'s that the choice `digest` belongs to."""
        return next((o for o in self.offers.get(owner, []) if digest in o.tokens), None)

    def purge(self, now: float) -> None:
        for owner, lists in list(self.offers.items()):
            for offer in [o for o in lists if self._expired(o, now)]:
                self.withdraw(owner, offer.key)

    def _drop(self, offer: _Offer) -> None:
        for token in offer.tokens:
            self.by_token.pop(token, None)

    def _expired(self, offer: _Offer, now: float) -> bool:
        first = self.by_token.get(offer.tokens[0]) if offer.tokens else None
        return first is None or first.expires <= now

    def to_json(self) -> dict[str, Any]:
        lists: dict[str, Any] = {}
        for owner, offers in self.offers.items():
            lists[owner] = [
                {
                    "key": offer.key,
                    "command": offer.command,
                    "choices": [
                        [t, p.label, p.value, p.version, p.expires]
                        for t, p in ((t, self.by_token[t]) for t in offer.tokens)
                    ],
                }
                for offer in offers
            ]
        return {"lists": lists}

    @classmethod
    def from_json(cls, state: dict[str, Any], label: str) -> _Table:
        """The table `state` holds (as `to_json` writes it, or the one list per person
        written before lists had keys)."""
        table = cls()
        try:
            lists = dict(state.get("lists", {}))
            for owner, offer in dict(state.get("offers", {})).items():  # before keys
                lists.setdefault(owner, [{"key": COMMAND_LIST, **offer}])
            for owner, offers in lists.items():
                for offer in offers:
                    table._read_offer(str(owner), offer)
        except (TypeError, ValueError, KeyError, AttributeError):
            log.warning("%s holds no usable choices; they are dropped", label)
            return cls()
        return table

    def _read_offer(self, owner: str, offer: dict[str, Any]) -> None:
        command, tokens = str(offer["command"]), []
        for token, lab, value, version, expires in offer["choices"]:
            tokens.append(str(token))
            self.by_token[str(token)] = PendingChoice(
                owner, command, str(lab), str(value), str(version), float(expires)
            )
        self.offers.setdefault(owner, []).append(_Offer(str(offer["key"]), command, tuple(tokens)))


class PendingChoices:
    """The choices offered and not yet picked, by token, in lists (one per key and person).
    `clock`: when they expire by (this process's monotonic clock, or wall time when
    `document` is given); `document`: the table every replica shares (None: this
    process's own)."""

    def __init__(
        self,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] | None = None,
        document: Document | None = None,
    ) -> None:
        self._ttl = ttl
        self._shared = SharedJson(document) if document is not None else None
        default = time.monotonic if document is None else time.time
        self._clock = clock if clock is not None else default
        self._memory = _Table()

    @classmethod
    def over(cls, documents: Documents | None) -> PendingChoices:
        """This process's table (`documents` None), or the replicas' ``choices.json``."""
        return cls(document=None if documents is None else documents(CHOICES_DOCUMENT))

    def __len__(self) -> int:
        return len(self._read().by_token)

    def offer(
        self,
        owner: str,
        command: str,
        options: Sequence[tuple[str, str]],
        version: str,
        ttl: float | None = None,
        key: str = COMMAND_LIST,
    ) -> tuple[Choice, ...]:
        """Record `options` (label, value) for `owner` as one list; the choices to show,
        payloads set. `ttl`: how long they hold, in seconds (by default the table's);
        `key`: the list it replaces is the owner's last under that key (by default the
        list of any command's; an approval batch gives its own)."""
        with self._changing() as table:
            now = self._clock()
            table.purge(now)
            expires = now + (self._ttl if ttl is None else ttl)
            tokens: list[str] = []
            choices: list[Choice] = []
            for label, value in options:
                token = secrets.token_urlsafe(16)
                digest = token_digest(token)
                table.by_token[digest] = PendingChoice(
                    owner, command, label, value, version, expires
                )
                tokens.append(digest)
                choices.append(Choice(label, CHOICE_PREFIX + token))
            table.add(owner, _Offer(key, command, tuple(tokens)))
        return tuple(choices)

    def take(self, payload: str, owner: str) -> PendingChoice:
        """The choice `payload` names, spent, if `owner` may pick it now; else refused."""
        token = payload.removeprefix(CHOICE_PREFIX) if payload.startswith(CHOICE_PREFIX) else ""
        digest = token_digest(token) if token else ""

        def take(table: _Table) -> PendingChoice | ChoiceRefusedError:
            pending = table.by_token.get(digest)
            if pending is None:
                return ChoiceRefusedError(
                    N_(
                        "That choice is not valid any more (already used, expired or replaced "
                        "by a newer list); nothing was changed."
                    )
                )
            if not secrets.compare_digest(pending.owner, owner):
                return ChoiceRefusedError(
                    N_(
                        "That choice was offered to someone else; only they can pick it. "
                        "Nothing was changed."
                    )
                )
            return self._spend(table, pending, digest)

        return self._decided(take)

    def take_numbered(self, owner: str, command: str, number: int) -> PendingChoice:
        """Option `number` (from 1) of `owner`'s latest list for `command`, spent."""

        def take(table: _Table) -> PendingChoice | ChoiceRefusedError:
            table.purge(self._clock())
            lists = [o for o in table.offers.get(owner, []) if o.command == command]
            offer = lists[-1] if lists else None
            if offer is None:
                return ChoiceRefusedError(
                    N_(
                        "There is no open list to pick from (lists expire after {minutes} "
                        "minutes or once one is picked); send /{command} again."
                    ),
                    minutes=f"{self._ttl / 60:g}",
                    command=command,
                )
            if not 1 <= number <= len(offer.tokens):
                return ChoiceRefusedError(
                    N_("Pick a number from 1 to {count}; nothing was changed."),
                    count=len(offer.tokens),
                )
            digest = offer.tokens[number - 1]
            return self._spend(table, table.by_token[digest], digest)

        return self._decided(take)

    def withdraw(self, owner: str, command: str | None = None) -> None:
        """Drop whatever `owner` was offered (their erasure: nothing of theirs stays), or
        only their lists of `command` (a /forget done: its list held the entries' text)."""
        with self._changing() as table:
            table.withdraw(owner, command=command)

    def _spend(
        self, table: _Table, pending: PendingChoice, digest: str
    ) -> PendingChoice | ChoiceRefusedError:
        offer = table.list_of(pending.owner, digest)
        if offer is not None:  # one pick per list: the others go with it
            table.withdraw(pending.owner, offer.key)
        if pending.expires <= self._clock():
            return ChoiceRefusedError(
                N_("That choice has expired; nothing was changed. Send the command again.")
            )
        return pending

    def _decided(self, decide: Callable[[_Table], T | ChoiceRefusedError]) -> T:
        """`decide`'s choice; its refusal raised once what it changed is kept."""
        with self._changing() as table:
            outcome = decide(table)
        if isinstance(outcome, ChoiceRefusedError):
            raise outcome
        return outcome

    @contextlib.contextmanager
    def _changing(self) -> Iterator[_Table]:
        """The table to change: this process's, or the shared one read and written back
        under its lock (the expired lists of everyone purged on the way)."""
        if self._shared is None:
            yield self._memory
            return
        with self._shared.changing() as state:
            table = _Table.from_json(state, self._shared.document.label)
            yield table
            table.purge(self._clock())
            state.clear()
            state.update(table.to_json())

    def _read(self) -> _Table:
        if self._shared is None:
            return self._memory
        return _Table.from_json(self._shared.read(), self._shared.document.label)

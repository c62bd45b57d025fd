"""Pending choices: the options a command offered a person, until one is picked.

A reply's `Choice` carries an opaque payload, ``choice:<token>``, where the
token is 128 random bits naming an entry in a server-side table (one table per
process). The entry records whom the choice was offered to, the command, the
value picked, the version of the data it was offered against, and when it
expires. A payload is honoured once, only for that person, only before it
expires: a forged token is unknown, a replayed one is used up, and one pressed
by someone else is refused without spending it. Offering a person new choices
withdraws their older ones, so the table holds at most one offer per person.

Platforms without buttons answer by number: ``/forget #2`` picks option 2 of
the person's latest offer for that command, through the same table and checks.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gateway.commands.registry import PendingChoice
from gateway.errors import ChoiceRefusedError
from gateway.i18n import N_
from gateway.messages import CHOICE_PREFIX, Choice

DEFAULT_TTL = 600.0  # ten minutes, like `/forget all confirm`


@dataclass(frozen=True)
class _Offer:
    tokens: tuple[str, ...]
    command: str


class PendingChoices:
    """The choices offered and not yet picked, by token; at most one offer per person."""

    def __init__(
        self, ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl = ttl
        self._clock = clock
        self._by_token: dict[str, PendingChoice] = {}
        self._offers: dict[str, _Offer] = {}  # owner -> their latest offer

    def __len__(self) -> int:
        return len(self._by_token)

    def offer(
        self,
        owner: str,
        command: str,
        options: Sequence[tuple[str, str]],
        version: str,
        ttl: float | None = None,
    ) -> tuple[Choice, ...]:
        """Record `options` (label, value) for `owner`; the choices to show, payloads set.
        `ttl`: how long they hold, in seconds (by default the table's)."""
        self._purge()
        self._withdraw(owner)
        expires = self._clock() + (self._ttl if ttl is None else ttl)
        tokens: list[str] = []
        choices: list[Choice] = []
        for label, value in options:
            token = secrets.token_urlsafe(16)
            self._by_token[token] = PendingChoice(owner, command, label, value, version, expires)
            tokens.append(token)
            choices.append(Choice(label, CHOICE_PREFIX + token))
        self._offers[owner] = _Offer(tuple(tokens), command)
        return tuple(choices)

    def take(self, payload: str, owner: str) -> PendingChoice:
        """The choice `payload` names, spent, if `owner` may pick it now; else refused."""
        token = payload.removeprefix(CHOICE_PREFIX) if payload.startswith(CHOICE_PREFIX) else ""
        pending = self._by_token.get(token)
        if pending is None:
            raise ChoiceRefusedError(
                N_(
                    "That choice is not valid any more (already used, expired or replaced by "
                    "a newer list); nothing was changed."
                )
            )
        if not secrets.compare_digest(pending.owner, owner):
            raise ChoiceRefusedError(
                N_(
                    "That choice was offered to someone else; only they can pick it. "
                    "Nothing was changed."
                )
            )
        return self._spend(token, pending)

    def take_numbered(self, owner: str, command: str, number: int) -> PendingChoice:
        """Option `number` (from 1) of `owner`'s latest offer for `command`, spent."""
        self._purge()
        offer = self._offers.get(owner)
        if offer is None or offer.command != command:
            raise ChoiceRefusedError(
                N_(
                    "There is no open list to pick from (lists expire after {minutes} "
                    "minutes or once one is picked); send /{command} again."
                ),
                minutes=f"{self._ttl / 60:g}",
                command=command,
            )
        if not 1 <= number <= len(offer.tokens):
            raise ChoiceRefusedError(
                N_("Pick a number from 1 to {count}; nothing was changed."),
                count=len(offer.tokens),
            )
        token = offer.tokens[number - 1]
        return self._spend(token, self._by_token[token])

    def _spend(self, token: str, pending: PendingChoice) -> PendingChoice:
        self._withdraw(pending.owner)  # one pick per offer: the others go with it
        if pending.expires <= self._clock():
            raise ChoiceRefusedError(
                N_("That choice has expired; nothing was changed. Send the command again.")
            )
        return pending

    def _withdraw(self, owner: str) -> None:
        offer = self._offers.pop(owner, None)
        if offer is not None:
            for token in offer.tokens:
                self._by_token.pop(token, None)

    def _purge(self) -> None:
        now = self._clock()
        expired = [o for o, offer in self._offers.items() if self._expired(offer, now)]
        for owner in expired:
            self._withdraw(owner)

    def _expired(self, offer: _Offer, now: float) -> bool:
        first = self._by_token.get(offer.tokens[0]) if offer.tokens else None
        return first is None or first.expires <= now

"""`/forget all` (erase everything held about the person, once confirmed) and `/export`.

``/forget all`` answers with exactly what would be erased and how to confirm:
a button, and on every platform the text ``/forget all confirm`` within ten
minutes. The request is kept per person (`PendingErasures`: every replica's,
on PostgreSQL); a confirmation with no request, after it expired, or from
anyone else erases nothing. On confirmation the person's open sessions are
dropped first (their providers' queued work drains and stops), then
`PersonData.erase` removes USER.md and its folder (their settings with it),
their skills, sessions, messages and index entries, and asks the memory
providers to erase theirs; the language hint remembered of them is forgotten
too, and whatever they were still offered to pick (`PendingChoices.withdraw`).
The reply counts what was erased, in the language the person had before
(their locale was read when the message came).

``/export`` writes the person's USER.md entries and every message of theirs to
one JSON Lines file (mode 0600), ``<home>/exports/<key>/mnemo-<key>.jsonl``,
replacing their previous one, at most once a minute per person. Where the
platform sends files the reply says the file is attached, never where it is
kept, and the file is deleted once sent; the console (on the operator's own
machine) shows its path instead, and the file is deleted ten minutes later,
at the person's next export, or, if the bot stopped meanwhile, at the next
export of anyone or the next start. `/forget` of one entry deletes the
person's pending export too, so no copy keeps what they removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from gateway.commands.choices import PendingChoices
from gateway.commands.memory import FORGET_NAME, IN_PRIVATE
from gateway.commands.registry import (
    Command,
    CommandContext,
    CommandReply,
    PendingChoice,
    SessionControl,
)
from gateway.i18n import N_
from gateway.person_locale import PersonLocale, PersonLocales
from gateway.shared_state import Documents, SharedJson
from memory_core import (
    Document,
    MemoryBackend,
    MemoryManager,
    PersonData,
    PersonHoldings,
    SessionBackend,
    SkillsStore,
)

log = logging.getLogger(__name__)

EXPORTS_FOLDER = "exports"
CONSOLE_HISTORY_FOLDER = "console"  # in the data dir: `<user key>.history`, what they typed
CONFIRM_TTL = 600.0  # ten minutes
EXPORT_INTERVAL = 60.0  # at most one /export a minute per person
EXPORT_KEPT = 600.0  # an export not sent (the console's) is deleted ten minutes on
CONSOLE = "console"  # the platform without buttons
CONFIRM_WORD = "confirm"
ERASURES_DOCUMENT = "erasures.json"  # the replicas' shared requests
CONFIRM_VERSION = "forget-all"  # never a USER.md version (those are sha256 hex digests)
CONFIRM_LABEL = N_("Yes, erase everything")
NOTHING_PENDING = N_(
    "There is no /forget all waiting for your confirmation, so nothing was erased. "
    "Send /forget all first."
)
EXPIRED = N_(
    "Your /forget all request expired (confirm within 10 minutes), so nothing was erased. "
    "Send /forget all again."
)


def person_data(
    memory: MemoryBackend,
    skills: SkillsStore,
    sessions: SessionBackend,
    new_manager: Callable[[], MemoryManager],
    home: Path,
) -> PersonData:
    """A person's data in the bot's stores, its providers (`new_manager`) and exports
    (chat exports older than ten minutes are deleted now)."""

    async def erase_in_providers(user_key: str) -> list[str]:
        manager = new_manager()  # the configured providers, built-in and external
        try:
            return await manager.erase_user(user_key)
        finally:
            await manager.shutdown()

    def console_history(key: str) -> list[Path]:
        return [home / CONSOLE_HISTORY_FOLDER / f"{key}.history"]

    person = PersonData(
        memory,
        skills,
        sessions,
        erase_in_providers,
        exports_dir=home / EXPORTS_FOLDER,
        person_files=console_history,
    )
    person.sweep_exports(EXPORT_KEPT)  # exports left behind when the bot last stopped
    return person


class PendingErasures:
    """The `/forget all` requests waiting for confirmation, one per person, with expiry:
    this process's (`clock` monotonic), or, given `document`, every replica's (the
    shared ``erasures.json``, by wall-clock time, expired requests purged at each change)."""

    def __init__(
        self,
        ttl: float = CONFIRM_TTL,
        clock: Callable[[], float] | None = None,
        document: Document | None = None,
    ) -> None:
        self._ttl = ttl
        self._shared = SharedJson(document) if document is not None else None
        default = time.monotonic if document is None else time.time
        self._clock = clock if clock is not None else default
        self._expires: dict[str, float] = {}

    @classmethod
    def over(cls, documents: Documents | None) -> PendingErasures:
        """This process's table (`documents` None), or the replicas' ``erasures.json``."""
        return cls(document=None if documents is None else documents(ERASURES_DOCUMENT))

    def __len__(self) -> int:
        if self._shared is None:
            return len(self._expires)
        return len(_requests(self._shared.read()))

    def request(self, user_key: str) -> None:
        """Record (or renew) `user_key`'s request."""
        with self._changing() as expires:
            now = self._clock()
            fresh = {k: t for k, t in expires.items() if t > now}  # stays small
            expires.clear()
            expires.update(fresh)
            expires[user_key] = now + self._ttl

    def take(self, user_key: str) -> str | None:
        """Spend `user_key`'s request: None when it was valid, else why it is refused (a
        catalog message)."""
        with self._changing() as requests:
            expires = requests.pop(user_key, None)
        if expires is None:
            return NOTHING_PENDING
        if expires <= self._clock():
            return EXPIRED
        return None

    @contextlib.contextmanager
    def _changing(self) -> Iterator[dict[str, float]]:
        """The requests by person: this process's, or the shared ones under their lock."""
        if self._shared is None:
            yield self._expires
            return
        with self._shared.changing() as state:
            requests = _requests(state)
            yield requests
            now = self._clock()
            state.clear()
            state["requests"] = {k: t for k, t in requests.items() if t > now}


def _requests(state: dict[str, Any]) -> dict[str, float]:
    """The shared document's requests (a malformed one counts as none)."""
    found = state.get("requests")
    if not isinstance(found, dict):
        return {}
    return {str(k): float(t) for k, t in found.items() if isinstance(t, (int, float))}


def forget_with_erasure_command(
    forget: Command,
    person: PersonData,
    choices: PendingChoices,
    erasures: PendingErasures,
    open_sessions: SessionControl,
    locales: PersonLocales | None = None,
) -> Command:
    """`forget` (/forget of one entry) that also takes ``/forget all``: its requests wait
    in `erasures`, its button is offered through `choices`, `open_sessions` drops the
    person's sessions before `person` is erased, and `locales` forgets the language hint
    it remembers of them (register this one, not `forget`)."""
    erasure = _Erasure(forget, person, choices, erasures, open_sessions, locales)
    return replace(forget, handler=erasure.forget, on_choice=erasure.on_choice)


class _Erasure:
    """``/forget all`` and its confirmation, beside /forget's own handlers."""

    def __init__(
        self,
        forget: Command,
        person: PersonData,
        choices: PendingChoices,
        erasures: PendingErasures,
        open_sessions: SessionControl,
        locales: PersonLocales | None,
    ) -> None:
        assert forget.on_choice is not None  # /forget offers choices of its own
        self._forget_one = forget.handler
        self._forget_choice = forget.on_choice
        self._person = person
        self._choices = choices
        self._erasures = erasures
        self._sessions = open_sessions
        self._locales = locales

    async def forget(self, ctx: CommandContext) -> CommandReply:
        """/forget: ``all`` (and ``all confirm``) erase everything; anything else is one entry."""
        if ctx.args.strip().lower().split()[:1] != ["all"]:
            return await self._forget_one(ctx)
        if ctx.message.chat_type != "private":
            return CommandReply(ctx.locale._(IN_PRIVATE, command="/forget all"))
        return await self._forget_all(ctx)

    async def on_choice(self, ctx: CommandContext, picked: PendingChoice) -> CommandReply:
        """The /forget command's choices: the erasure button here, entry choices to /forget's."""
        if picked.version == CONFIRM_VERSION:
            return await self._confirm(ctx)
        return await self._forget_choice(ctx, picked)

    async def _forget_all(self, ctx: CommandContext) -> CommandReply:
        """``/forget all``: say what would be erased; ``/forget all confirm``: erase it."""
        locale = ctx.locale
        words = ctx.args.split()
        if [w.lower() for w in words] == ["all", CONFIRM_WORD]:
            return await self._confirm(ctx)
        if len(words) != 1:
            return CommandReply(
                locale._(
                    "Send /forget all to erase everything I hold about you (you confirm next)."
                )
            )
        key = ctx.identity.user_key
        held = await self._person.holdings(key)
        self._erasures.request(key)
        values = {"held": holdings_summary(locale, held), "minutes": format(CONFIRM_TTL / 60, "g")}
        if ctx.message.platform == CONSOLE:  # no button there: the words are the way
            text = locale._(
                "This erases everything I hold about you: {held}, and whatever the memory "
                "provider keeps about you. It cannot be undone.\n"
                "To confirm, send /forget all confirm within {minutes} minutes.",
                **values,
            )
            return CommandReply(text)
        text = locale._(
            "This erases everything I hold about you: {held}, and whatever the memory "
            "provider keeps about you. It cannot be undone.\n"
            "To confirm, press the button or send /forget all confirm within {minutes} minutes.",
            **values,
        )
        label = locale._(CONFIRM_LABEL)
        offered = self._choices.offer(key, FORGET_NAME, [(label, "")], CONFIRM_VERSION)
        return CommandReply(text, choices=offered)

    async def _confirm(self, ctx: CommandContext) -> CommandReply:
        key = ctx.identity.user_key
        refused = self._erasures.take(key)
        if refused is not None:
            return CommandReply(ctx.locale._(refused))
        await self._sessions.drop_person(key)
        erased = await self._person.erase(key)  # their settings too: ctx.locale was read before
        if self._locales is not None:
            self._locales.forget(key)  # the language hint held of them in memory
        self._choices.withdraw(key)  # whatever they were offered (its labels are theirs)
        log.info("erased everything held about %s at their request", key)
        return CommandReply(erasure_report(erased, ctx.locale))


def holdings_summary(locale: PersonLocale, held: PersonHoldings) -> str:
    """``3 memory entries, 2 sessions (14 messages) and 1 skill``, in `locale`'s language."""
    return locale._(
        "{entries}, {sessions} ({messages}) and {skills}",
        entries=locale.n_("{n} memory entry", "{n} memory entries", held.entries),
        sessions=locale.n_("{n} session", "{n} sessions", held.sessions),
        messages=locale.n_("{n} message", "{n} messages", held.messages),
        skills=locale.n_("{n} skill", "{n} skills", held.skills),
    )


def erasure_report(erased: PersonHoldings, locale: PersonLocale) -> str:
    """What an erasure removed, and any provider that could not erase, in a few lines of
    `locale`'s language (the providers' own failure lines stay as they wrote them)."""
    summary = holdings_summary(locale, erased)
    lines = [locale._("Erased everything I held about you: {held}.", held=summary)]
    if erased.provider_failures:
        failures = "; ".join(erased.provider_failures)
        lines.append(
            locale._(
                "A memory provider could not erase its data about you (the operator has been "
                "told): {failures}",
                failures=failures,
            )
        )
        log.error("provider erasure failed: %s", failures)
    return "\n".join(lines)


def export_command(
    person: PersonData,
    clock: Callable[[], float] = time.monotonic,
    keep_for: float = EXPORT_KEPT,
) -> Command:
    """/export: everything `person` data holds about the sender, as one file; at most one
    a minute per person (by `clock`), the file deleted once sent or `keep_for` seconds on."""
    exports = _Exports(person, clock, keep_for)
    return Command("export", N_("everything I hold about you, as one file"), exports.export)


class _Exports:
    """/export, with when each person last exported (pruned as it goes: it stays small)."""

    def __init__(self, person: PersonData, clock: Callable[[], float], keep_for: float) -> None:
        self._person = person
        self._clock = clock
        self._keep_for = keep_for
        self._last: dict[str, float] = {}

    async def export(self, ctx: CommandContext) -> CommandReply:
        if ctx.message.chat_type != "private":  # the file would be posted to the whole group
            return CommandReply(ctx.locale._(IN_PRIVATE, command="/export"))
        locale = ctx.locale
        key = ctx.identity.user_key
        now = self._clock()
        self._last = {k: t for k, t in self._last.items() if now - t < EXPORT_INTERVAL}
        if key in self._last:
            wait = max(1, math.ceil(EXPORT_INTERVAL - (now - self._last[key])))
            return CommandReply(
                locale.n_(
                    "You can export once a minute; try again in {n} second.",
                    "You can export once a minute; try again in {n} seconds.",
                    wait,
                )
            )
        self._person.sweep_exports(self._keep_for)  # anyone's export left behind
        result = await self._person.export_for_chat(key)
        self._last[key] = now
        asyncio.get_running_loop().call_later(self._keep_for, self._expire, key, result.path)
        entries = locale.n_("{n} memory entry", "{n} memory entries", result.entries)
        messages = locale.n_("{n} message", "{n} messages", result.messages)
        return CommandReply(
            locale._(
                "Everything I hold about you ({entries}, {messages}) is in the file attached "
                "below. I delete my copy once it is sent.",
                entries=entries,
                messages=messages,
            ),
            document=result.path,
            unattached_text=locale._(  # the console's: its operator may see where the file is
                "Everything I hold about you ({entries}, {messages}) is in one file (replaced "
                "by your next /export, deleted in {minutes} minutes): {path}",
                entries=entries,
                messages=messages,
                minutes=format(self._keep_for / 60, "g"),
                path=str(result.path),
            ),
            after_sent=functools.partial(self._person.discard_export, key),
        )

    def _expire(self, key: str, path: Path) -> None:
        """Delete `key`'s export if it is still the one written `keep_for` seconds ago."""
        try:
            written = path.stat().st_mtime
        except FileNotFoundError:
            return
        if time.time() - written >= self._keep_for - 1:  # not a newer export since
            self._person.discard_export(key)

"""`/forget all` (erase everything held about the person, once confirmed) and `/export`.

``/forget all`` answers with exactly what would be erased and how to confirm:
a button, and on every platform the text ``/forget all confirm`` within ten
minutes. The request is kept per person (`PendingErasures`); a confirmation
with no request, after it expired, or from anyone else erases nothing. On
confirmation the person's open sessions are dropped first (their providers'
queued work drains and stops), then `PersonData.erase` removes USER.md and its
folder, their skills, sessions, messages and index entries, and asks the
memory providers to erase theirs; the reply counts what was erased.

``/export`` writes the person's USER.md entries and every message of theirs to
one JSON Lines file (mode 0600) under ``<home>/exports/<key>/``; the reply
names the path and carries the file as a document for platforms that send one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from gateway.commands.choices import PendingChoice
from gateway.commands.memory import FORGET, IN_PRIVATE
from gateway.commands.registry import Command, CommandContext, CommandReply
from memory_core import (
    FileMemoryStore,
    MemoryManager,
    PersonData,
    PersonHoldings,
    SessionStore,
    SkillsStore,
)

log = logging.getLogger(__name__)

EXPORTS_FOLDER = "exports"
CONFIRM_TTL = 600.0  # ten minutes
CONFIRM_WORD = "confirm"
CONFIRM_VERSION = "forget-all"  # never a USER.md version (those are sha256 hex digests)
CONFIRM_LABEL = "Yes, erase everything"
UNAVAILABLE = "Erasing and exporting your data is not available here."
NOTHING_PENDING = (
    "There is no /forget all waiting for your confirmation, so nothing was erased. "
    "Send /forget all first."
)
EXPIRED = (
    "Your /forget all request expired (confirm within 10 minutes), so nothing was erased. "
    "Send /forget all again."
)


def person_data(
    memory: FileMemoryStore,
    skills: SkillsStore,
    sessions: SessionStore,
    new_manager: Callable[[], MemoryManager],
    home: Path,
) -> PersonData:
    """A person's data in the bot's stores, its providers (`new_manager`) and exports."""

    async def erase_in_providers(user_key: str) -> list[str]:
        manager = new_manager()  # the configured providers, built-in and external
        try:
            return await manager.erase_user(user_key)
        finally:
            await manager.shutdown()

    return PersonData(
        memory, skills, sessions, erase_in_providers, exports_dir=home / EXPORTS_FOLDER
    )


class PendingErasures:
    """The `/forget all` requests waiting for confirmation, one per person, with expiry."""

    def __init__(
        self, ttl: float = CONFIRM_TTL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl = ttl
        self._clock = clock
        self._expires: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._expires)

    def request(self, user_key: str) -> None:
        """Record (or renew) `user_key`'s request."""
        now = self._clock()
        self._expires = {k: t for k, t in self._expires.items() if t > now}  # stays small
        self._expires[user_key] = now + self._ttl

    def take(self, user_key: str) -> str | None:
        """Spend `user_key`'s request: None when it was valid, else why it is refused."""
        expires = self._expires.pop(user_key, None)
        if expires is None:
            return NOTHING_PENDING
        if expires <= self._clock():
            return EXPIRED
        return None


async def forget_all(ctx: CommandContext) -> CommandReply:
    """``/forget all``: say what would be erased; ``/forget all confirm``: erase it."""
    if ctx.person is None or ctx.erasures is None:
        return CommandReply(UNAVAILABLE)
    words = ctx.args.split()
    if [w.lower() for w in words] == ["all", CONFIRM_WORD]:
        return await _confirm(ctx)
    if len(words) != 1:
        return CommandReply(
            "Send /forget all to erase everything I hold about you (you confirm next)."
        )
    key = ctx.message.user_key
    held = await ctx.person.holdings(key)
    ctx.erasures.request(key)
    choices = ctx.choices.offer(key, FORGET.name, [(CONFIRM_LABEL, "")], CONFIRM_VERSION)
    return CommandReply(
        f"This erases everything I hold about you: {held.summary()}, and whatever the "
        "memory provider keeps about you. It cannot be undone.\n"
        f"To confirm, press the button or send /forget all {CONFIRM_WORD} within 10 minutes.",
        choices=choices,
    )


async def forget_choice(ctx: CommandContext, picked: PendingChoice) -> CommandReply:
    """The /forget command's choices: the erasure button here, entry choices to /forget's own."""
    if picked.version == CONFIRM_VERSION:
        return await _confirm(ctx)
    assert FORGET.on_choice is not None
    return await FORGET.on_choice(ctx, picked)


async def _confirm(ctx: CommandContext) -> CommandReply:
    if ctx.person is None or ctx.erasures is None:
        return CommandReply(UNAVAILABLE)
    key = ctx.message.user_key
    refused = ctx.erasures.take(key)
    if refused is not None:
        return CommandReply(refused)
    if ctx.drop_person_sessions is not None:
        await ctx.drop_person_sessions(key)
    erased = await ctx.person.erase(key)
    log.info("erased everything held about %s at their request", key)
    return CommandReply(erasure_report(erased))


def erasure_report(erased: PersonHoldings) -> str:
    """What an erasure removed, and any provider that could not erase, in a few lines."""
    lines = [f"Erased everything I held about you: {erased.summary()}."]
    if erased.provider_failures:
        lines.append(
            "A memory provider could not erase its data about you (the operator has been "
            "told): " + "; ".join(erased.provider_failures)
        )
        log.error("provider erasure failed: %s", "; ".join(erased.provider_failures))
    return "\n".join(lines)


async def _export(ctx: CommandContext) -> CommandReply:
    if ctx.message.chat_type != "private":  # the file would be posted to the whole group
        return CommandReply(IN_PRIVATE.format(command="/export"))
    if ctx.person is None:
        return CommandReply(UNAVAILABLE)
    key = ctx.message.user_key
    result = await ctx.person.export(key, ctx.person.export_path(key, time.time()))
    return CommandReply(
        f"Everything I hold about you ({_count(result.entries, 'memory entry', 'memory entries')}, "
        f"{_count(result.messages, 'message', 'messages')}) is in one file: {result.path}",
        document=result.path,
    )


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


EXPORT = Command("export", "everything I hold about you, as one file", _export)


async def forget(ctx: CommandContext) -> CommandReply:
    """/forget: ``all`` (and ``all confirm``) erase everything; anything else is one entry."""
    if ctx.args.strip().lower().split()[:1] != ["all"]:
        return await FORGET.handler(ctx)
    if ctx.message.chat_type != "private":
        return CommandReply(IN_PRIVATE.format(command="/forget all"))
    return await forget_all(ctx)


FORGET_WITH_ERASURE = replace(FORGET, handler=forget, on_choice=forget_choice)
"""/forget, whose choices include the /forget all button (register this one, not `FORGET`)."""

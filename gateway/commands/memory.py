"""/memory and /forget: what the bot keeps about a person, and removing one entry.

`/memory` lists the person's USER.md entries, numbered, each with who wrote it
and when, with the usage of its budget; admins also see MEMORY.md, numbered on
its own, its entries with their origin and date too (an admin's write shows as
"an admin", never which one). `/memory history`, `/memory undo [N]` and `/memory archive` are in
`gateway.commands.memory_history`. `/forget <number>`
removes that entry of USER.md; `/forget <text>` removes the one entry holding
the text (case-insensitive). When several hold it, they are offered as choices
(buttons where the platform has them; ``/forget #N`` everywhere) bound to the
person and to the version of the file they were listed from: a pick made after
the file changed is refused, never applied to a different entry. Only the
person's own USER.md is ever read or changed, and only in a private chat (in a
group it would be shown to everyone there). `/forget all` belongs to
`gateway.commands.erase`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from gateway.commands import memory_history as history
from gateway.commands.choices import PendingChoices
from gateway.commands.registry import (
    Command,
    CommandContext,
    CommandReply,
    PendingChoice,
    SessionControl,
)
from gateway.errors import ChoiceRefusedError
from gateway.i18n import N_
from gateway.messages import CommandArgument
from memory_core import (
    MemoryBackend,
    MemoryEditError,
    MemoryFileError,
    MemoryState,
    NoMatchError,
    Operation,
    Origin,
)

if TYPE_CHECKING:
    from gateway.person_locale import PersonLocale

log = logging.getLogger(__name__)
H = TypeVar("H", bound=Callable[..., Awaitable[CommandReply]])
PREVIEW_CHARS = 100
FORGET_NAME = "forget"  # the command's name, which its pending choices are offered under
IN_PRIVATE = N_(
    "{command} shows or changes what I keep about you, so it works only in a private "
    "chat with me, not in a group."
)
MAX_DIGITS = 6  # more than any USER.md holds entries
HISTORY_SHOWN = 20  # the changes /memory history lists
MEMORY_USAGE = N_(
    "/memory shows what I remember about you; /memory history the latest changes; "
    "/memory undo (or /memory undo N) reverts one; /memory archive what was moved out "
    "of a full memory."
)
_NUMBER = re.compile(r"(?P<pick>#)?(?P<digits>[0-9]+)")  # ASCII digits only
TOO_LONG = N_(
    "That number is far larger than the number of entries I keep, so nothing was removed. "
    "Send /memory to see them numbered."
)
NOT_ASCII = N_(
    "Write the number with the digits 0 to 9, e.g. /forget 2 (or /forget #2 to pick from a "
    "list); nothing was removed."
)
FORGET_USAGE = N_(
    "Tell me what to forget: /forget <number> (as numbered by /memory) or "
    "/forget <a few words of the entry>. /forget all erases everything I hold about you."
)


def entries_version(entries: tuple[str, ...]) -> str:
    """A fingerprint of a file's entries: any change to them changes it."""
    digest = hashlib.sha256()
    for entry in entries:
        digest.update(entry.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


def memory_command(
    memory: MemoryBackend,
    open_sessions: SessionControl | None = None,
    discard_export: Callable[[str], object] | None = None,
) -> Command:
    """/memory over `memory`: the person's USER.md, numbered, each entry with its origin
    (admins: MEMORY.md too), and its subcommands `history`, `undo [N]` and `archive`
    (`gateway.commands.memory_history`); after an undo `open_sessions` rebuild the
    person's prompts and `discard_export(user_key)` drops their pending /export file."""

    async def show(ctx: CommandContext) -> CommandReply:
        locale = ctx.locale
        if ctx.message.chat_type != "private":
            return CommandReply(locale._(IN_PRIVATE, command="/memory"))
        key = ctx.identity.user_key
        sub, _, rest = ctx.args.strip().partition(" ")
        sub, rest = sub.casefold(), rest.strip()
        if sub == "history":
            changes = memory.history("user", key, HISTORY_SHOWN)
            return CommandReply(history.history_text(locale, changes))
        if sub == "undo":
            return await history.undo(locale, memory, key, rest, open_sessions, discard_export)
        if sub == "archive":
            return CommandReply(history.archive_text(locale, memory.archived(key)))
        if sub:
            return CommandReply(locale._(MEMORY_USAGE))
        return CommandReply(_listing(locale, memory, key, ctx.is_admin))

    return Command(
        "memory",
        N_("show what I remember about you (/memory history, /memory undo, /memory archive)"),
        _guarded(show),
        arguments=(CommandArgument("what", N_("history, undo [N] or archive"), False),),
        needs_session=True,  # an undo rebuilds the person's prompts: not under a running turn
    )


def _listing(locale: PersonLocale, memory: MemoryBackend, key: str, is_admin: bool) -> str:
    """The person's entries, numbered, each with who wrote it and when (admins: MEMORY.md's
    too)."""
    state = memory.read("user", key)
    if state.entries:
        used = history.usage(locale, state.chars, state.limit)
        lines = [locale._("What I remember about you ({usage}):", usage=used)]
        lines += history.entry_lines(locale, memory.origins("user", key))
        lines.append(
            locale._("Send /forget <number> to remove one, /memory history for the changes.")
        )
    else:
        lines = [locale._("I don't remember anything about you yet.")]
    if is_admin:
        shared = memory.read("memory")
        used = history.usage(locale, shared.chars, shared.limit)
        lines += ["", locale._("Shared memory, MEMORY.md ({usage}):", usage=used)]
        lines += history.entry_lines(locale, memory.origins("memory")) or [locale._("(empty)")]
    return "\n".join(lines)


def forget_command(
    memory: MemoryBackend,
    choices: PendingChoices,
    open_sessions: SessionControl,
    discard_export: Callable[[str], object] | None = None,
) -> Command:
    """/forget <number or text> over `memory`; several matches are offered as `choices`,
    `open_sessions` rebuild the person's prompts once an entry is gone, and
    `discard_export(user_key)` deletes their pending /export file, which still holds it."""
    forget = _Forget(memory, choices, open_sessions, discard_export)
    return Command(
        FORGET_NAME,
        N_("forget one thing I remember about you (/forget all: everything)"),
        _guarded(forget.handle),
        arguments=(
            CommandArgument("what", N_("a number from /memory, or words of the entry"), True),
        ),
        on_choice=_guarded(forget.apply_choice),
        needs_session=True,  # it rebuilds the person's prompts: not under a running turn
    )


class _Forget:
    """/forget of one USER.md entry, bound to the store, the choices and the open sessions."""

    def __init__(
        self,
        memory: MemoryBackend,
        choices: PendingChoices,
        open_sessions: SessionControl,
        discard_export: Callable[[str], object] | None,
    ) -> None:
        self._memory = memory
        self._choices = choices
        self._sessions = open_sessions
        self._discard_export = discard_export

    async def handle(self, ctx: CommandContext) -> CommandReply:
        args, locale = ctx.args.strip(), ctx.locale
        if ctx.message.chat_type != "private":
            return CommandReply(locale._(IN_PRIVATE, command="/forget"))
        if not args:
            return CommandReply(locale._(FORGET_USAGE))
        key = ctx.identity.user_key
        state = self._memory.read("user", key)
        number = _NUMBER.fullmatch(args)
        if number is not None:
            digits = number["digits"]
            if len(digits) > MAX_DIGITS:
                return CommandReply(locale._(TOO_LONG))
            if number["pick"]:
                try:
                    picked = self._choices.take_numbered(key, FORGET_NAME, int(digits))
                except ChoiceRefusedError as exc:
                    return CommandReply(exc.line(locale))
                return await self.apply_choice(ctx, picked)
            return await self._forget_number(ctx, state, int(digits))
        if args.removeprefix("#").isdigit():  # digits, but not 0-9 (², ٣, ３)
            return CommandReply(locale._(NOT_ASCII))
        if len(args) > state.limit:
            return CommandReply(
                locale._(
                    "That is {length} characters, longer than everything I may keep about "
                    "you ({limit}), so it matches nothing. Send a few words of the entry, "
                    "or its number from /memory.",
                    length=format(len(args), ","),
                    limit=format(state.limit, ","),
                )
            )
        return await self._forget_text(ctx, state, args)

    async def _forget_text(
        self, ctx: CommandContext, state: MemoryState, args: str
    ) -> CommandReply:
        """Forget the one entry holding `args`, or offer the several that do."""
        locale = ctx.locale
        needle = args.casefold()
        hits = [entry for entry in state.entries if needle in entry.casefold()]
        if not hits:
            return CommandReply(
                locale._("Nothing I remember about you contains “{text}”.", text=_preview(args))
            )
        if len(hits) == 1:
            return await self._remove(ctx, hits[0])
        options = [(_preview(entry), entry) for entry in hits]
        version = entries_version(state.entries)
        offered = self._choices.offer(ctx.identity.user_key, FORGET_NAME, options, version)
        return CommandReply(
            locale.n_(
                "{n} entry contains “{text}”. Which one should I forget? Send /forget #1 to "
                "/forget #{n} (this list holds for 10 minutes):",
                "{n} entries contain “{text}”. Which one should I forget? Send /forget #1 to "
                "/forget #{n} (this list holds for 10 minutes):",
                len(hits),
                text=_preview(args),
            ),
            offered,
        )

    async def _forget_number(
        self, ctx: CommandContext, state: MemoryState, number: int
    ) -> CommandReply:
        count, locale = len(state.entries), ctx.locale
        if not 1 <= number <= count:
            if count == 0:
                return CommandReply(
                    locale._("I don't remember anything about you, so there is nothing to forget.")
                )
            return CommandReply(
                locale.n_(
                    "There is no entry {number}: I hold {n} about you, numbered 1 to {n} "
                    "by /memory.",
                    "There is no entry {number}: I hold {n} about you, numbered 1 to {n} "
                    "by /memory.",
                    count,
                    number=number,
                )
            )
        return await self._remove(ctx, state.entries[number - 1])

    async def apply_choice(self, ctx: CommandContext, picked: PendingChoice) -> CommandReply:
        """Forget the entry `picked` names, if USER.md is still as it was when offered."""
        state = self._memory.read("user", ctx.identity.user_key)
        if entries_version(state.entries) != picked.version or picked.value not in state.entries:
            return CommandReply(
                ctx.locale._(
                    "What I remember about you changed since that list was made, so I removed "
                    "nothing. Send /memory to see it now."
                )
            )
        return await self._remove(ctx, picked.value)

    async def _remove(self, ctx: CommandContext, entry: str) -> CommandReply:
        """Remove `entry`; the person's open sessions then rebuild their prompts without it."""
        key, locale = ctx.identity.user_key, ctx.locale
        try:
            removal = [Operation("remove", old_text=entry)]
            result = self._memory.apply("user", key, removal, Origin("person"))
        except NoMatchError:
            return CommandReply(locale._("That entry is already gone; nothing else was changed."))
        except MemoryEditError as exc:  # e.g. its neighbours, joined, read as an injection
            return CommandReply(
                locale._(
                    "I couldn't remove that entry, so nothing changed: {reason}", reason=str(exc)
                )
            )
        await self._sessions.refresh_prompts(key)  # no stored prompt may still carry the entry
        if self._discard_export is not None:  # nor a copy waiting to be fetched
            self._discard_export(key)
        used = history.usage(locale, result.state.chars, result.state.limit)
        return CommandReply(
            locale._("Forgotten: {entry}\n({usage} now used.)", entry=entry, usage=used)
        )


def _guarded(handler: H) -> H:
    """`handler`, answering a memory file it cannot read or write with one clear line in the
    person's language (its first argument is the `CommandContext`)."""

    @functools.wraps(handler)
    async def guarded(ctx: CommandContext, *args: Any) -> CommandReply:
        try:
            return await handler(ctx, *args)
        except MemoryFileError as exc:
            log.warning("memory command failed: %s", exc)
            return CommandReply(
                ctx.locale._(
                    "I couldn't read or change what I remember about you: {reason}",
                    reason=str(exc),
                )
            )

    return cast(H, guarded)


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"

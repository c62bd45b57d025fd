"""/memory and /forget: what the bot keeps about a person, and removing one entry.

`/memory` lists the person's USER.md entries, numbered, each whole with who wrote
it and when (marked when it keeps no evidence), with the usage of its budget;
admins also see MEMORY.md, numbered on its own, its entries with their origin and
date too (an admin's write shows as "an admin", never which one). `/memory
history`, `/memory undo [N]`, `/memory archive` and `/memory why N` are in
`gateway.commands.memory_history`.

`/forget <number>` forgets that entry of USER.md; `/forget <text>` the one entry,
live or in the archive, holding the text (case-insensitive). Forgetting is for
good (`MemoryBackend.forget`: every copy of the text goes, and no undo brings it
back); the person's messages it rested on are then redacted too, through the
`forget_words` callable. When several entries hold the text, they are offered as
choices (buttons where the platform has them; ``/forget #N`` everywhere) bound to
the person and to the version of what they were listed from: a pick made after it
changed is refused, never applied to a different entry. Only the person's own
USER.md is ever read or changed, and only in a private chat (in a group it would
be shown to everyone there). `/forget all` belongs to `gateway.commands.erase`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import gateway.commands.memory_history as history
from gateway.commands.choices import PendingChoices
from gateway.commands.registry import (
    Command,
    CommandContext,
    CommandReply,
    PendingChoice,
    SessionControl,
)
from gateway.delivery.literal import literal
from gateway.errors import ChoiceRefusedError
from gateway.i18n import N_
from gateway.messages import CommandArgument
from memory_core import (
    MemoryBackend,
    MemoryFileError,
    MemoryState,
    Origin,
)

if TYPE_CHECKING:
    from gateway.person_locale import PersonLocale

log = logging.getLogger(__name__)
H = TypeVar("H", bound=Callable[..., Awaitable[CommandReply]])
ForgetWords = Callable[[str, tuple[int, ...], tuple[str, ...]], Awaitable[object]]
"""Redacts a person's messages an entry they forgot rested on: (user_key, message ids,
the entries' texts)."""
PREVIEW_CHARS = 100
FORGET_NAME = "forget"  # the command's name, which its pending choices are offered under
IN_PRIVATE = N_(
    "{command} shows or changes what I keep about you, so it works only in a private "
    "chat with me, not in a group."
)
MAX_DIGITS = 6  # more than any USER.md holds entries
HISTORY_SHOWN = 20  # the changes /memory history lists
MEMORY_USAGE = N_(
    "/memory shows what I remember about you; /memory why N what entry N rests on; "
    "/memory history the latest changes; /memory undo (or /memory undo N) reverts one; "
    "/memory archive what was moved out of a full memory."
)
WHY_USAGE = N_("Send /memory why N with the number of an entry from /memory; nothing was changed.")
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
    (admins: MEMORY.md too), and its subcommands `history`, `undo [N]`, `archive` and
    `why N` (`gateway.commands.memory_history`); after an undo `open_sessions` rebuild
    the person's prompts and `discard_export(user_key)` drops their pending /export file."""

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
        if sub == "why":
            return CommandReply(_why(locale, memory, key, rest))
        if sub:
            return CommandReply(locale._(MEMORY_USAGE))
        return CommandReply(_listing(locale, memory, key, ctx.is_admin))

    return Command(
        "memory",
        N_(
            "show what I remember about you (/memory why N, /memory history, /memory undo, "
            "/memory archive)"
        ),
        _guarded(show),
        arguments=(CommandArgument("what", N_("why N, history, undo [N] or archive"), False),),
        needs_session=True,  # an undo rebuilds the person's prompts: not under a running turn
    )


def _listing(locale: PersonLocale, memory: MemoryBackend, key: str, is_admin: bool) -> str:
    """The person's entries, numbered, each with who wrote it and when (admins: MEMORY.md's
    too)."""
    state = memory.read("user", key)
    if state.entries:
        used = history.usage(locale, state.chars, state.limit)
        lines = [locale._("What I remember about you ({usage}):", usage=used)]
        origins = memory.origins("user", key)
        lines += history.entry_lines(locale, origins, mark=True)
        if any(not o.evidence for o in origins):
            lines.append(locale._(history.NO_EVIDENCE_LEGEND))
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


def _why(locale: PersonLocale, memory: MemoryBackend, key: str, args: str) -> str:
    """/memory why N: entry N of /memory, whole, with its writer and evidence."""
    number = _NUMBER.fullmatch(args)
    if number is None or number["pick"] or len(number["digits"]) > MAX_DIGITS:
        return locale._(WHY_USAGE)
    origins = memory.origins("user", key)
    index = int(number["digits"])
    if not 1 <= index <= len(origins):
        if not origins:
            return locale._("I don't remember anything about you yet.")
        return _no_entry(locale, index, len(origins))
    return history.why_text(locale, index, origins[index - 1])


def _no_entry(locale: PersonLocale, number: int, count: int) -> str:
    return locale.n_(
        "There is no entry {number}: I hold {n} about you, numbered 1 to {n} by /memory.",
        "There is no entry {number}: I hold {n} about you, numbered 1 to {n} by /memory.",
        count,
        number=number,
    )


def forget_command(
    memory: MemoryBackend,
    choices: PendingChoices,
    open_sessions: SessionControl,
    discard_export: Callable[[str], object] | None = None,
    forget_words: ForgetWords | None = None,
) -> Command:
    """/forget <number or text> over `memory`; several matches are offered as `choices`.
    Once an entry is forgotten, `forget_words(user_key, message ids, texts)` redacts the
    person's messages it rested on, `open_sessions` rebuild their prompts without it, and
    `discard_export(user_key)` deletes their pending /export file, which still holds it."""
    forget = _Forget(memory, choices, open_sessions, discard_export, forget_words)
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
    """/forget of one entry, bound to the store, the choices and the open sessions."""

    def __init__(
        self,
        memory: MemoryBackend,
        choices: PendingChoices,
        open_sessions: SessionControl,
        discard_export: Callable[[str], object] | None,
        forget_words: ForgetWords | None,
    ) -> None:
        self._memory = memory
        self._choices = choices
        self._sessions = open_sessions
        self._discard_export = discard_export
        self._forget_words = forget_words

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

    def _held(self, key: str, state: MemoryState) -> tuple[str, ...]:
        """The person's entries, then those of their archive not also live."""
        archived = [a.text for a in self._memory.archived(key) if a.text not in state.entries]
        return (*state.entries, *dict.fromkeys(archived))

    async def _forget_text(
        self, ctx: CommandContext, state: MemoryState, args: str
    ) -> CommandReply:
        """Forget the one entry (live or archived) holding `args`, or offer those that do."""
        locale = ctx.locale
        needle = args.casefold()
        held = self._held(ctx.identity.user_key, state)
        hits = [entry for entry in held if needle in entry.casefold()]
        if not hits:
            return CommandReply(
                locale._("Nothing I remember about you contains “{text}”.", text=_preview(args))
            )
        if len(hits) == 1:
            return await self._remove(ctx, hits[0])
        options = [(_preview(entry), entry) for entry in hits]
        version = entries_version(held)
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
            return CommandReply(_no_entry(locale, number, count))
        return await self._remove(ctx, state.entries[number - 1])

    async def apply_choice(self, ctx: CommandContext, picked: PendingChoice) -> CommandReply:
        """Forget the entry `picked` names, if the entries are still as they were when offered."""
        state = self._memory.read("user", ctx.identity.user_key)
        held = self._held(ctx.identity.user_key, state)
        if entries_version(held) != picked.version or picked.value not in held:
            return CommandReply(
                ctx.locale._(
                    "What I remember about you changed since that list was made, so I removed "
                    "nothing. Send /memory to see it now."
                )
            )
        return await self._remove(ctx, picked.value)

    async def _remove(self, ctx: CommandContext, entry: str) -> CommandReply:
        """Forget `entry` for good; the messages it rested on are redacted, and the person's
        open sessions rebuild their prompts without it."""
        key, locale = ctx.identity.user_key, ctx.locale
        result = self._memory.forget(key, [entry], Origin("person"))
        if not result.forgotten:
            return CommandReply(locale._("That entry is already gone; nothing else was changed."))
        self._choices.withdraw(key, FORGET_NAME)  # a list of entries to pick held its text
        if self._forget_words is not None:  # the words it rested on go from the sessions too
            texts = tuple(dict.fromkeys((*result.forgotten, *result.versions)))
            await self._forget_words(key, result.message_ids, texts)
        await self._sessions.refresh_prompts(key)  # no stored prompt may still carry the entry
        if self._discard_export is not None:  # nor a copy waiting to be fetched
            self._discard_export(key)
        state = self._memory.read("user", key)
        used = history.usage(locale, state.chars, state.limit)
        return CommandReply(
            locale._(
                "Forgotten: {entry}\nThat is for good: no undo brings it back. ({usage} now used.)",
                entry=literal(entry),
                usage=used,
            )
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

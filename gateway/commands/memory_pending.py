"""Memory changes waiting for the person's approval: the notice, its buttons, and
``/memory pending``, ``/memory approve N|all``, ``/memory reject N|all``.

What a background run (or, with ``memory.write_approval: all`` or an entry that
reads as an instruction, the person's own turn) wanted to write is staged in
`PendingChanges`. `StagedNotices.announce` tells the person once per staged
batch, in their private chat only (their private chat with the bot on that
platform, as state.db knows it; a group never sees it), with Approve and
Reject buttons (`PendingChoices`: only that person can press them; each batch's
buttons are a list of their own, beside any list a command offers later, and
live as long as the changes, until the bot restarts, after which ``/memory
pending`` and its commands remain). When no private chat is known the changes
are only listed by ``/memory pending``.

Every line that quotes an entry (the notice, the listing, "Saved:", "Not saved:",
"Dropped:") shows it whole, as it will be stored, in `literal` Markdown (no
markup of its own shows; a second line of it is indented), with, when the
change has evidence, the person's closest message. Changes are listed one per
paragraph when an entry holds several lines, so a long notice is cut between
changes (`gateway.delivery.splitting`) and the buttons come with its last part.

The commands and the buttons work only in a private chat, like ``/memory``.
Approving writes through the store with each change's staged origin (a
replace or remove whose entry changed since is refused in one line); then the
person's open sessions rebuild their prompts. Rejecting drops the changes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from gateway.commands.choices import PendingChoices
from gateway.commands.memory_history import origin_label
from gateway.commands.registry import (
    Command,
    CommandContext,
    CommandReply,
    PendingChoice,
    SessionControl,
)
from gateway.delivery import INDENT, literal, unnumbered
from gateway.i18n import N_
from gateway.messages import ChoiceSink, InboundMessage, ReplySink
from memory_core import Decision, PendingChanges, SessionBackend, StagedChange

if TYPE_CHECKING:
    from gateway.person_locale import PersonLocale

log = logging.getLogger(__name__)

COMMAND = "memory"
VERSION = "memory-pending"  # tells the approval buttons apart from /memory's other choices
WORDS = ("pending", "approve", "reject")
APPROVE_LABEL = N_("Approve")
REJECT_LABEL = N_("Reject")
IN_PRIVATE = N_(
    "/memory {word} shows or changes what I keep about you, so it works only in a private "
    "chat with me, not in a group."
)
USAGE = N_("Send /memory {word} <number> (as listed by /memory pending), several numbers, or all.")
NONE_WAITING = N_("No memory changes are waiting for your approval.")
_IDS = re.compile(r"#?[0-9]{1,9}")
LONG_REPLACE = 200  # characters of both entries past which "with …" goes on a line of its own

MEMORY_CORE_REASONS = (
    N_("what I learn in the background waits for your approval"),
    N_("every memory change waits for your approval"),
    N_("it was proposed together with a change that waits for your approval"),
    N_("the judge could not confirm it is a fact"),
    N_("it contains a link"),
    N_("it contains an e-mail address"),
    N_("it contains a shell command or code"),
    N_("it gives the assistant an order"),
    N_("the entry it changes was edited or removed since, so it was not applied"),
)
"""Copies of the reasons memory_core gives for a staged change (`approval`'s, the safety
scan's `instruction_words`) and for a refused approval (`pending.CHANGED_MEANWHILE`):
memory_core cannot import the gateway to mark them, and they are stored in English in
USER.pending.json, so these copies put them in the catalogs and `_reason` translates
them where shown."""
REASON_SEPARATOR = "; "  # how `Approval` joins several reasons of one change
LocaleOf = Callable[[str], "PersonLocale"]
"""A person's locale by user key (`PersonLocales.of_person`), for lines no message asked for."""

SinkFor = Callable[[InboundMessage], ReplySink | None]
"""A sink that writes to the given chat through its platform's adapter (None: no adapter)."""


class PendingReview:
    """The approval commands and buttons over `pending`, offered through `choices`."""

    def __init__(
        self,
        pending: PendingChanges,
        choices: PendingChoices,
        open_sessions: SessionControl | None = None,
    ) -> None:
        self._pending = pending
        self._choices = choices
        self._sessions = open_sessions

    @staticmethod
    def handles(args: str) -> bool:
        """Whether `/memory <args>` is one of these commands."""
        return args.strip().lower().split()[:1] in ([w] for w in WORDS)

    async def handle(self, ctx: CommandContext) -> CommandReply:
        """``/memory pending | approve N|all | reject N|all``."""
        word, _, rest = ctx.args.strip().partition(" ")
        word, locale = word.lower(), ctx.locale
        if ctx.message.chat_type != "private":
            return CommandReply(locale._(IN_PRIVATE, word=word))
        key = ctx.identity.user_key
        if word == "pending":
            return CommandReply(self.listing(locale, key))
        ids = _ids(rest)
        if ids is False:
            return CommandReply(locale._(USAGE, word=word))
        chosen = None if ids is True else ids
        if word == "approve":
            return await self._approve(locale, key, chosen)
        dropped, missing = self._pending.reject(key, chosen)
        return CommandReply(_rejected(locale, dropped, missing))

    async def on_choice(self, ctx: CommandContext, picked: PendingChoice) -> CommandReply:
        """A pressed Approve or Reject button: ``approve:1,2`` or ``reject:1,2``."""
        locale = ctx.locale
        if ctx.message.chat_type != "private":
            return CommandReply(locale._(IN_PRIVATE, word="approve"))
        word, _, listed = picked.value.partition(":")
        ids = [int(i) for i in listed.split(",") if i.isdigit()]
        key = ctx.identity.user_key
        if word == "approve":
            return await self._approve(locale, key, ids)
        dropped, missing = self._pending.reject(key, ids)
        return CommandReply(_rejected(locale, dropped, missing))

    def listing(self, locale: PersonLocale, user_key: str) -> str:
        """The person's staged changes, numbered by id, with why each waits and until when."""
        staged = self._pending.list(user_key)
        if not staged:
            return locale._(NONE_WAITING)
        head = locale._("Waiting for your approval ({n}):", n=len(staged))
        blocks = [
            locale._(
                "{line}, until {moment}", line=_line(locale, c), moment=locale.moment(c.expires)
            )
            for c in staged
        ]
        tail = locale._("Send /memory approve <number> or all, /memory reject <number> or all.")
        return _joined([head, *blocks, tail])

    def notice(
        self, locale: PersonLocale, user_key: str, staged: Sequence[StagedChange], now: float
    ) -> CommandReply:
        """The one message that tells the person of a staged batch, with its two buttons."""
        ids = ",".join(str(c.id) for c in staged)
        ttl = max(60.0, min(c.expires for c in staged) - now)
        buttons = [
            (locale._(APPROVE_LABEL), f"approve:{ids}"),
            (locale._(REJECT_LABEL), f"reject:{ids}"),
        ]
        offered = self._choices.offer(  # a list of this batch's own: other lists leave it
            user_key, COMMAND, buttons, VERSION, ttl=ttl, key=f"{VERSION}:{staged[0].batch}"
        )
        days = max(1, round(ttl / 86400))
        head = locale.n_(
            "I'd like to remember this about you; it waits for your approval (for {n} day):",
            "I'd like to remember this about you; it waits for your approval (for {n} days):",
            days,
        )
        blocks = [_line(locale, change) for change in staged]
        listed = " ".join(str(c.id) for c in staged)
        tail = locale._("Or send /memory approve {ids} or /memory reject {ids}.", ids=listed)
        return CommandReply(_joined([head, *blocks, tail]), choices=offered)

    async def _approve(
        self, locale: PersonLocale, user_key: str, ids: Sequence[int] | None
    ) -> CommandReply:
        decision = self._pending.approve(user_key, ids)
        if decision.applied and self._sessions is not None:
            await self._sessions.refresh_prompts(user_key)  # the next turn sees the entry
        return CommandReply(_approved(locale, decision))


def with_pending(memory: Command, review: PendingReview) -> Command:
    """`/memory` that also takes ``pending``, ``approve`` and ``reject`` (and their buttons);
    everything else goes to `memory` as before."""
    show = memory.handler
    other_choice = memory.on_choice

    async def handler(ctx: CommandContext) -> CommandReply:
        if review.handles(ctx.args):
            return await review.handle(ctx)
        return await show(ctx)

    async def on_choice(ctx: CommandContext, picked: PendingChoice) -> CommandReply:
        if picked.version == VERSION:
            return await review.on_choice(ctx, picked)
        if other_choice is None:
            return CommandReply(ctx.locale._("That choice no longer leads anywhere."))
        return await other_choice(ctx, picked)

    return replace(memory, handler=handler, on_choice=on_choice)


class StagedNotices:
    """Tells a person of their staged changes: once per batch, in their private chat only,
    in their language and time zone."""

    def __init__(
        self,
        review: PendingReview,
        sessions: SessionBackend,
        sink_for: SinkFor,
        clock: Callable[[], float],
        locale_of: LocaleOf,
    ) -> None:
        """`locale_of(user_key)`: the person's locale (`PersonLocales.of_person`)."""
        self._review = review
        self._sessions = sessions
        self._sink_for = sink_for
        self._clock = clock
        self._locale_of = locale_of

    async def announce(self, platform: str, user_key: str, staged: Sequence[StagedChange]) -> bool:
        """Send the notice of `staged`; whether a private chat of the person was reached."""
        if not staged:
            return False
        chat = await self._private_chat(platform, user_key)
        if chat is None:
            log.info("%d staged change(s) for %s: no private chat known", len(staged), user_key)
            return False
        user_id = user_key.split("-", 1)[1]
        message = InboundMessage(platform, chat, "private", user_id, "")
        sink = self._sink_for(message)
        if sink is None:
            return False
        locale = self._locale_of(user_key)
        reply = self._review.notice(locale, user_key, staged, self._clock())
        await sink.write(reply.text)  # without buttons (the console) the commands it names
        if isinstance(sink, ChoiceSink):
            await sink.offer(reply.choices)
        await sink.finish()
        return True

    async def _private_chat(self, platform: str, user_key: str) -> str | None:
        """The person's private chat with the bot on `platform`, if state.db knows one."""
        for session_key in await self._sessions.user_session_keys(user_key):
            parts = session_key.split(":")
            if len(parts) == 3 and parts[0] == platform and parts[1] == "private":
                return parts[2]
        return None


def _ids(text: str) -> list[int] | bool:
    """The numbers in `text`; True for "all"; False when it is neither."""
    words = text.replace(",", " ").split()
    if [w.lower() for w in words] == ["all"]:
        return True
    if not words or not all(_IDS.fullmatch(w) for w in words):
        return False
    return [int(w.lstrip("#")) for w in words]


def _line(locale: PersonLocale, change: StagedChange) -> str:
    """The change's line: 3. add “…” (learned in the background; why — closest: “…”),
    its number escaped so that no Markdown renumbers it as a list."""
    why = reason(locale, change.reason)
    if change.evidence and not change.grounded:  # the person's message nearest to it
        closest = literal(change.evidence[0].span)
        why = locale._("{reason} — closest: “{closest}”", reason=why, closest=closest)
    elif change.evidence:  # what grounded it, as they said it
        said = literal(change.evidence[0].span)
        why = locale._("{reason} — you said: “{said}”", reason=why, said=said)
    line = locale._(
        "{id}. {change} ({origin}; {reason})",
        id=change.id,
        change=describe(locale, change),
        origin=origin_label(locale, change.origin),
        reason=why,
    )
    return unnumbered(line)


def describe(locale: PersonLocale, change: StagedChange) -> str:
    """One staged change for the person: "add “…”", "replace “…” with “…”", "remove “…”",
    each entry whole and `literal`."""
    content, against = literal(change.content or ""), literal(change.against or "")
    if change.action == "add":
        return locale._("add “{content}”", content=content)
    if change.action == "replace":
        if "\n" in content + against or len(content) + len(against) > LONG_REPLACE:
            return locale._(
                "replace “{against}”\n{indent}with “{content}”",
                against=against,
                indent=INDENT,
                content=content,
            )
        return locale._("replace “{against}” with “{content}”", against=against, content=content)
    return locale._("remove “{against}”", against=against)


def reason(locale: PersonLocale, text: str) -> str:
    """Why a change waits (or was refused), in the person's language: each of the reasons
    joined in `text` is translated when it is a catalog message (else shown as stored)."""
    first, *more = [locale._(part) for part in text.split(REASON_SEPARATOR)]
    for part in more:
        first = locale._("{reasons}; {reason}", reasons=first, reason=part)
    return first


def _joined(blocks: Sequence[str]) -> str:
    """`blocks` one per line, or one per paragraph when one of them holds several lines,
    so that a cut between messages falls between blocks (`split_message`)."""
    return ("\n\n" if any("\n" in block for block in blocks) else "\n").join(blocks)


def _approved(locale: PersonLocale, decision: Decision) -> str:
    lines = [locale._("Saved: {change}", change=describe(locale, c)) for c in decision.applied]
    lines += [
        locale._(
            "Not saved: {change}: {reason}", change=describe(locale, c), reason=reason(locale, why)
        )
        for c, why in decision.refused
    ]
    if decision.missing:
        lines.append(_missing(locale, decision.missing))
    return _joined(lines) or locale._(NONE_WAITING)


def _rejected(locale: PersonLocale, dropped: Sequence[StagedChange], missing: Sequence[int]) -> str:
    lines = [locale._("Dropped: {change}", change=describe(locale, c)) for c in dropped]
    if missing:
        lines.append(_missing(locale, missing))
    return _joined(lines) or locale._(NONE_WAITING)


def _missing(locale: PersonLocale, ids: Sequence[int]) -> str:
    return locale._(
        "Nothing waits as {ids} (decided, expired or never staged); see /memory pending.",
        ids=", ".join(str(i) for i in ids),
    )

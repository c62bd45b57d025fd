"""Memory changes waiting for the person's approval: the notice, its buttons, and
``/memory pending``, ``/memory approve N|all``, ``/memory reject N|all``.

What a background run (or, with ``memory.write_approval: all`` or an entry that
reads as an instruction, the person's own turn) wanted to write is staged in
`PendingChanges`. `StagedNotices.announce` tells the person once per staged
batch, in their private chat only (their private chat with the bot on that
platform, as state.db knows it; a group never sees it), with Approve and
Reject buttons (`PendingChoices`: only that person can press them; a button
lives as long as the changes, until the bot restarts or the person is offered
another list, after which ``/memory pending`` and its commands remain). When
no private chat is known the changes are only listed by ``/memory pending``.

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

from gateway.commands.choices import PendingChoices
from gateway.commands.registry import (
    Command,
    CommandContext,
    CommandReply,
    PendingChoice,
    SessionControl,
)
from gateway.messages import ChoiceSink, InboundMessage, ReplySink
from memory_core import Decision, PendingChanges, SessionStore, StagedChange

log = logging.getLogger(__name__)

COMMAND = "memory"
VERSION = "memory-pending"  # tells the approval buttons apart from /memory's other choices
WORDS = ("pending", "approve", "reject")
APPROVE_LABEL = "Approve"
REJECT_LABEL = "Reject"
IN_PRIVATE = (
    "/memory {word} shows or changes what I keep about you, so it works only in a private "
    "chat with me, not in a group."
)
USAGE = "Send /memory {word} <number> (as listed by /memory pending), several numbers, or all."
_IDS = re.compile(r"#?[0-9]{1,9}")

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
        word = word.lower()
        if ctx.message.chat_type != "private":
            return CommandReply(IN_PRIVATE.format(word=word))
        key = ctx.identity.user_key
        if word == "pending":
            return CommandReply(self.listing(key))
        ids = _ids(rest)
        if ids is False:
            return CommandReply(USAGE.format(word=word))
        chosen = None if ids is True else ids
        if word == "approve":
            return await self._approve(key, chosen)
        dropped, missing = self._pending.reject(key, chosen)
        return CommandReply(_rejected(dropped, missing))

    async def on_choice(self, ctx: CommandContext, picked: PendingChoice) -> CommandReply:
        """A pressed Approve or Reject button: ``approve:1,2`` or ``reject:1,2``."""
        if ctx.message.chat_type != "private":
            return CommandReply(IN_PRIVATE.format(word="approve"))
        word, _, listed = picked.value.partition(":")
        ids = [int(i) for i in listed.split(",") if i.isdigit()]
        key = ctx.identity.user_key
        if word == "approve":
            return await self._approve(key, ids)
        dropped, missing = self._pending.reject(key, ids)
        return CommandReply(_rejected(dropped, missing))

    def listing(self, user_key: str) -> str:
        """The person's staged changes, numbered by id, with why each waits."""
        staged = self._pending.list(user_key)
        if not staged:
            return "No memory changes are waiting for your approval."
        lines = [f"Waiting for your approval ({len(staged)}):"]
        lines += [_line(change) for change in staged]
        lines.append("Send /memory approve <number> or all, /memory reject <number> or all.")
        return "\n".join(lines)

    def notice(self, user_key: str, staged: Sequence[StagedChange], now: float) -> CommandReply:
        """The one message that tells the person of a staged batch, with its two buttons."""
        ids = ",".join(str(c.id) for c in staged)
        ttl = max(60.0, min(c.expires for c in staged) - now)
        offered = self._choices.offer(
            user_key,
            COMMAND,
            [(APPROVE_LABEL, f"approve:{ids}"), (REJECT_LABEL, f"reject:{ids}")],
            VERSION,
            ttl=ttl,
        )
        days = max(1, round(ttl / 86400))
        head = (
            "I'd like to remember this about you; it waits for your approval "
            f"(for {days} day{'s' if days != 1 else ''}):"
        )
        lines = [head, *(_line(change) for change in staged)]
        listed = " ".join(str(c.id) for c in staged)
        lines.append(f"Or send /memory approve {listed} or /memory reject {listed}.")
        return CommandReply("\n".join(lines), choices=offered)

    async def _approve(self, user_key: str, ids: Sequence[int] | None) -> CommandReply:
        decision = self._pending.approve(user_key, ids)
        if decision.applied and self._sessions is not None:
            await self._sessions.refresh_prompts(user_key)  # the next turn sees the entry
        return CommandReply(_approved(decision))


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
            return CommandReply("That choice no longer leads anywhere.")
        return await other_choice(ctx, picked)

    return replace(memory, handler=handler, on_choice=on_choice)


class StagedNotices:
    """Tells a person of their staged changes: once per batch, in their private chat only."""

    def __init__(
        self,
        review: PendingReview,
        sessions: SessionStore,
        sink_for: SinkFor,
        clock: Callable[[], float],
    ) -> None:
        self._review = review
        self._sessions = sessions
        self._sink_for = sink_for
        self._clock = clock

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
        reply = self._review.notice(user_key, staged, self._clock())
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


def _line(change: StagedChange) -> str:
    return f"{change.id}. {change.describe()} ({change.origin.label()}; {change.reason})"


def _approved(decision: Decision) -> str:
    lines = [f"Saved: {c.describe()}" for c in decision.applied]
    lines += [f"Not saved: {c.describe()}: {why}" for c, why in decision.refused]
    if decision.missing:
        lines.append(_missing(decision.missing))
    return "\n".join(lines) or "No memory changes are waiting for your approval."


def _rejected(dropped: Sequence[StagedChange], missing: Sequence[int]) -> str:
    lines = [f"Dropped: {c.describe()}" for c in dropped]
    if missing:
        lines.append(_missing(missing))
    return "\n".join(lines) or "No memory changes are waiting for your approval."


def _missing(ids: Sequence[int]) -> str:
    listed = ", ".join(str(i) for i in ids)
    return f"Nothing waits as {listed} (decided, expired or never staged); see /memory pending."

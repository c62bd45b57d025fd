"""One reply streamed into a chat: typing, then drafts or messages edited as text
arrives, then the final text, split and always delivered.

`write` only records the text; a small task shows it, at most once per the
chat's throttle interval and never twice the same, so the model's stream never
waits on the platform. In a private chat that takes drafts the text streams as
a native draft and each part is sent as a message; elsewhere the first text is
sent as a message replying to the person's and then edited. A long reply keeps
streaming: as soon as the text no longer fits one message, that part is cut as
`split_message` cuts it (but never before what the chat already shows, so a
part only grows), finished (its last edit, or its message sent after the draft)
and the text goes on in a new message, each update taking the chat's throttle.
`finish` scrubs `<memory-context>` spans from the whole text (a check after the
stream scrubber), cuts what is left the same way and delivers every part whose
message does not show it yet: a final edit of its streamed message (a fresh
message when there is none, or when that edit fails for good), else a new
message; choices go with the last part. Each message shows link previews only
while every link in its text is one the person sent in this session
(`trust_links`, `links.previews_allowed`); a reply never told shows none.
Flood control pauses the chat's interim
updates; the final text waits `retry_after` and retries, a bounded number of
times. A failure after every fallback is logged once, without the text, and
never raised to the caller.

`finish` is meant to be called once per reply; a `write` after it starts a new
reply in the same chat (a new message, replying to the same message).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gateway.delivery.channel import Channel
from gateway.delivery.links import previews_allowed, trusted_links
from gateway.delivery.splitting import (
    CLOSE_FENCE,
    fitting_prefix,
    held_back,
    next_cut,
    part_prefix,
    split_message,
)
from gateway.delivery.throttle import ChatThrottle, Clock, Sleep
from gateway.errors import (
    AnswerUnreadableError,
    DeliveryError,
    GatewayError,
    RateLimitedError,
)
from gateway.messages import Choice
from memory_core import StreamingContextScrubber, scrub_context

log = logging.getLogger(__name__)

FINAL_ATTEMPTS = 5  # tries for each final call under flood control


def _new_draft_id() -> int:
    return secrets.randbelow(2**31 - 1) + 1


@dataclass
class _Part:
    """One message of a reply, as the chat shows it."""

    text: str = ""  # its final text, once cut ("" while it still grows)
    message_id: str | None = None  # the message showing it, once sent
    shown: str = ""  # what that message (or the draft) shows now
    unread: bool = False  # sent, but the platform's answer (its id) could not be read
    draft_id: int = field(default_factory=_new_draft_id)


class StreamedReply:
    """A `ReplySink`, `ChoiceSink` and `LinkSink` that streams one reply into `channel`.

    Call `start` when the person's message arrives: it shows typing every
    `typing_every` seconds until the first text is shown or the reply finishes
    (at most `typing_limit` seconds). An adapter should also call `finish` once
    the inbox returned: a reply the inbox finished is not touched again, and one
    it left unanswered (a refusal it keeps quiet about) stops typing.
    """

    def __init__(
        self,
        channel: Channel,
        throttle: ChatThrottle,
        *,
        reply_to: str | None,
        private: bool,
        typing_every: float = 4.0,
        typing_delay: float = 0.0,
        typing_limit: float = 300.0,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        final_attempts: int = FINAL_ATTEMPTS,
    ) -> None:
        self._channel = channel
        self._throttle = throttle
        self._reply_to = reply_to
        self._private = private
        self._typing_every = typing_every
        self._typing_delay = typing_delay  # a reply whose text comes sooner shows no typing
        self._typing_limit = typing_limit
        self._clock = clock
        self._sleep = sleep
        self._attempts = max(1, final_attempts)
        self.message_ids: list[str] = []  # the messages of the last finished reply
        self.finished_at: float | None = None
        self._trusted: frozenset[str] = frozenset()  # links that may keep their previews
        self._begin()

    def _begin(self) -> None:
        self._text = ""
        self._scrubber = StreamingContextScrubber()
        self._visible = ""  # the text so far, scrubbed as a stream (held back at a tag)
        self._choices: tuple[Choice, ...] = ()
        self._documents: list[Path] = []  # files to send after the text
        self._parts: list[_Part] = []  # the parts already cut, in order
        self._open = _Part()  # the part still growing
        # Where the open part starts in the stripped visible text, what is dropped
        # there, and the fence open there (reopened at its start).
        self._open_at = 0
        self._open_strip: str | None = None
        self._open_language: str | None = None
        self._drafts = self._private and self._channel.limits.drafts
        self._interim = True  # interim updates still wanted
        self._changed = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        self._in_call = False
        self._finishing = False
        self._done = False
        self._typing_stop = asyncio.Event()
        self._typing: asyncio.Task[None] | None = None

    @property
    def pending(self) -> bool:
        """Whether text written is waiting to be shown (or being shown)."""
        return self._changed.is_set() or self._in_call

    @property
    def typing_active(self) -> bool:
        return self._typing is not None and not self._typing.done()

    async def start(self) -> None:
        """Show typing until the first text (idempotent)."""
        if self._typing is None and not self._done:
            self._typing = asyncio.create_task(self._keep_typing())

    async def write(self, piece: str) -> None:
        if self._done:
            self._begin()
        if not piece:
            return
        self._text += piece
        self._visible += self._scrubber.feed(piece)
        if self._interim:
            if self._pump is None:
                self._pump = asyncio.create_task(self._run_pump())
            self._changed.set()

    def trust_links(self, texts: Iterable[str]) -> None:
        """The links in `texts` (what the person sent in this session) keep their previews."""
        self._trusted = self._trusted | trusted_links(texts)

    def _previews(self, text: str) -> bool:
        return previews_allowed(text, self._trusted)

    async def offer(self, choices: tuple[Choice, ...]) -> None:
        """Show `choices` as buttons with the last part of the reply."""
        self._choices = tuple(choices)

    async def attach(self, path: Path) -> None:
        """Send the file at `path` as a document after the reply's text."""
        self._documents.append(path)

    async def finish(self) -> None:
        if self._done:
            return
        self._done = True
        await self._stop_pump()
        await self._stop_typing()
        parts = self._final_parts(scrub_context(self._text).strip())
        self.message_ids = []
        if parts:
            try:
                await self._deliver(parts)
            except GatewayError as exc:  # every fallback spent: the chat gets no more
                log.warning("reply not delivered: %s: %s", type(exc).__name__, exc)
        for document in self._documents:
            try:
                self.message_ids.append(await self._channel.send_document(document))
            except AnswerUnreadableError as exc:
                log.warning("document taken as delivered: %s", exc)
            except GatewayError as exc:
                log.warning("document not delivered: %s: %s", type(exc).__name__, exc)
        self.finished_at = self._clock()

    # The interim updates.

    async def _run_pump(self) -> None:
        try:
            while not self._finishing:
                await self._changed.wait()
                if self._finishing:
                    return
                await self._throttle.wait()
                self._changed.clear()
                if self._finishing:
                    return
                self._in_call = True
                try:
                    await self._show_interim()
                finally:
                    self._in_call = False
        except Exception:  # the top of the task: interim views are best effort
            log.exception("interim reply update failed")

    async def _show_interim(self) -> None:
        if not self._interim:
            return
        self._cut_full_parts()
        update = self._next_update()
        if update is None:
            return
        part, text = update
        self._throttle.used()  # before any await: another reply in the chat waits its turn
        await self._stop_typing()
        try:
            if part is self._open and self._drafts:
                await self._channel.draft(part.draft_id, text)
            elif part.message_id is None:
                reply_to = self._reply_to if part is self._first_part() else None
                part.message_id = await self._channel.send(
                    text, reply_to=reply_to, previews=self._previews(text)
                )
            else:
                await self._channel.edit(part.message_id, text, previews=self._previews(text))
            part.shown = text
            self._throttle.returned()
        except RateLimitedError as exc:  # the chat is paused; the next view goes after
            self._throttle.pause(exc.retry_after)
            self._changed.set()
        except AnswerUnreadableError as exc:  # shown, most likely: never shown again
            log.warning("interim reply update taken as shown: %s", exc)
            part.shown = text
            if part.message_id is None and not (part is self._open and self._drafts):
                part.unread = True  # a message whose id is not known: it cannot be edited
                self._interim = False
        except DeliveryError as exc:
            log.info("interim reply update refused: %s", exc)
            if part is self._open and self._drafts:  # no drafts here: stream by edits
                self._drafts = False
                self._changed.set()
            else:
                self._interim = False  # the final delivery sends afresh if need be
        else:
            if self._next_update() is not None:  # a full part was finished: go on
                self._changed.set()

    def _next_update(self) -> tuple[_Part, str] | None:
        """The next thing to show: a cut part its message does not show yet (the drafts
        of a cut part become its message), else the open part's new view."""
        for part in self._parts:
            if part.message_id is None or part.shown != part.text:
                return part, part.text
        view = self._open_view()
        if view and view != self._open.shown:
            return self._open, view
        return None

    def _first_part(self) -> _Part:
        return self._parts[0] if self._parts else self._open

    def _open_rest(self) -> str:
        return self._visible.lstrip()[self._open_at :].lstrip(self._open_strip)

    def _open_view(self) -> str:
        """The open part as the chat may show it now. The last few units before the
        limit are held back, back to a word's end, so the cut can still go after the
        shown text, at a space, with room to close a code fence."""
        limits = self._channel.limits
        rest = self._open_rest().rstrip()
        if not rest:
            return ""
        prefix = part_prefix(self._open_language, limits.max_units, limits.units)
        view = prefix + rest
        room = limits.max_units - limits.units(CLOSE_FENCE)
        if room < limits.max_units // 2 or limits.units(view) <= room:
            return held_back(view)
        end = fitting_prefix(view, room, limits.units)
        if not view[end].isspace():
            space = max(view.rfind(char, len(prefix), end) for char in " \t\n")
            if space > len(prefix):
                if space < len(self._open.shown):
                    return self._open.shown  # nothing more until the part is cut
                end = space
        return held_back(view[:end])

    def _cut_full_parts(self) -> None:
        """Cut the open part while it no longer fits one message, never before what
        the chat shows of it; the text after each cut opens the next part."""
        limits = self._channel.limits
        while True:
            rest = self._open_rest()
            cut = next_cut(
                rest, self._open_language, limits.max_units, limits.units, self._shown_floor(rest)
            )
            if cut is None:
                return
            if cut.part.strip():
                self._open.text = cut.part
                self._parts.append(self._open)
            self._open = _Part()
            skipped = len(self._visible.lstrip()) - self._open_at - len(rest)
            self._open_at += skipped + cut.end
            self._open_strip, self._open_language = cut.strip, cut.language

    def _shown_floor(self, rest: str) -> int:
        """How many characters of `rest` the open part's message or draft shows."""
        limits = self._channel.limits
        prefix = part_prefix(self._open_language, limits.max_units, limits.units)
        shown = self._open.shown
        if not shown.startswith(prefix) or not rest.startswith(shown[len(prefix) :]):
            return 0
        return len(shown) - len(prefix)

    def _final_parts(self, final: str) -> list[_Part]:
        """The parts of `final` (the whole reply, scrubbed), each with the message
        that shows it so far. The parts already cut keep their cuts; the rest is cut
        the same way, the open part again never before what it shows."""
        limits = self._channel.limits
        cut_text = self._visible.lstrip()[: self._open_at]
        if not final.startswith(cut_text):  # the stream scrubber let out something else
            log.info("streamed text differs from the final text: parts cut afresh")
            parts = split_message(final, limits.max_units, limits.units)
            kept = [*self._parts, self._open]
            return [
                _Part(text, kept[i].message_id, kept[i].shown, unread=kept[i].unread)
                if i < len(kept)
                else _Part(text)
                for i, text in enumerate(parts)
            ]
        self._visible = final
        self._cut_full_parts()
        rest = self._open_rest()
        if rest:  # it fits: the cutting above stopped
            self._open.text = part_prefix(self._open_language, limits.max_units, limits.units)
            self._open.text += rest
            return [*self._parts, self._open]
        return list(self._parts)

    async def _stop_pump(self) -> None:
        self._finishing = True
        self._changed.set()
        pump, self._pump = self._pump, None
        if pump is None:
            return
        if not self._in_call:  # waiting on the throttle: the final delivery waits itself
            pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump

    # Typing.

    async def _keep_typing(self) -> None:
        until = asyncio.get_running_loop().time() + self._typing_limit
        if self._typing_delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._typing_stop.wait(), self._typing_delay)
        try:
            while not self._typing_stop.is_set() and asyncio.get_running_loop().time() < until:
                try:
                    await self._channel.typing()
                except (RateLimitedError, AnswerUnreadableError):
                    pass  # typing is a courtesy; try again next round
                except DeliveryError as exc:
                    log.info("typing refused: %s", exc)
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._typing_stop.wait(), self._typing_every)
        except Exception:  # the top of the task
            log.exception("typing indicator failed")

    async def _stop_typing(self) -> None:
        self._typing_stop.set()
        if self._typing is not None:
            await self._typing

    # The final delivery.

    async def _deliver(self, parts: Sequence[_Part]) -> None:
        last = len(parts) - 1
        for index, part in enumerate(parts):
            choices = self._choices if index == last else ()
            # An edit carries no buttons: a part with choices goes as a new message.
            if part.message_id is not None and not choices and await self._final_edit(part):
                self.message_ids.append(part.message_id)
                continue
            if part.unread and part.shown == part.text and not choices:
                continue  # sent whole already (its answer unread): never sent twice
            reply_to = self._reply_to if index == 0 else None
            sent = await self._final_send(part.text, reply_to, choices)
            if sent is not None:
                self.message_ids.append(sent)

    async def _final_edit(self, part: _Part) -> bool:
        """The part's message edited to its text; False when the edit failed for good."""
        assert part.message_id is not None
        if part.text == part.shown:
            return True
        for _ in range(self._attempts):
            await self._throttle.wait()
            self._throttle.used()
            try:
                await self._channel.edit(
                    part.message_id, part.text, previews=self._previews(part.text)
                )
                self._throttle.returned()
                part.shown = part.text
                return True
            except RateLimitedError as exc:
                self._throttle.pause(exc.retry_after)
            except AnswerUnreadableError as exc:  # edited, most likely: not sent afresh
                log.warning("final edit taken as done: %s", exc)
                part.shown = part.text
                return True
            except DeliveryError as exc:
                log.info("final edit refused, sending afresh: %s", exc)
                return False
        log.info("final edit still rate limited after %d tries, sending afresh", self._attempts)
        return False

    async def _final_send(
        self, text: str, reply_to: str | None, choices: Sequence[Choice]
    ) -> str | None:
        """A new message with `text`, its id (None: sent, but the answer could not be read,
        so never sent again); raises once flood control outlasts every try."""
        for attempt in range(1, self._attempts + 1):
            try:
                return await self._channel.send(
                    text, reply_to=reply_to, choices=choices, previews=self._previews(text)
                )
            except AnswerUnreadableError as exc:
                log.warning("reply taken as delivered: %s", exc)
                return None
            except RateLimitedError as exc:
                self._throttle.pause(exc.retry_after)
                if attempt == self._attempts:
                    raise
                await self._sleep(exc.retry_after)
        raise AssertionError("unreachable")  # the loop returns or raises

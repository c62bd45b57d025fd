"""One reply streamed into a chat: typing, then drafts or a message edited as text
arrives, then the final text, split and always delivered.

`write` only records the text; a small task shows it, at most once per the
chat's throttle interval and never twice the same, so the model's stream never
waits on the platform. In a private chat that takes drafts the text streams as
a native draft and the final text is sent as message(s); elsewhere the first
text is sent as a message replying to the person's and then edited. `finish`
scrubs `<memory-context>` spans from the whole text (a check after the stream
scrubber), splits it at the channel's limit and delivers it: the first part as
the final edit of the streamed message (a fresh message when there is none, or
when that edit fails for good), the others as new messages; choices go with the
last part. Flood control pauses the chat's interim updates; the final text waits
`retry_after` and retries, a bounded number of times. A failure after every
fallback is logged once, without the text, and never raised to the caller.

`finish` is meant to be called once per reply; a `write` after it starts a new
reply in the same chat (a new message, replying to the same message).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Sequence
from pathlib import Path

from gateway.delivery.channel import Channel
from gateway.delivery.splitting import split_message
from gateway.delivery.throttle import ChatThrottle, Clock, Sleep
from gateway.errors import DeliveryError, GatewayError, RateLimitedError
from gateway.messages import Choice
from memory_core import StreamingContextScrubber, scrub_context

log = logging.getLogger(__name__)

FINAL_ATTEMPTS = 5  # tries for each final call under flood control


class StreamedReply:
    """A `ReplySink` and `ChoiceSink` that streams one reply into `channel`.

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
        self._begin()

    def _begin(self) -> None:
        self._text = ""
        self._scrubber = StreamingContextScrubber()
        self._visible = ""  # the text so far, scrubbed as a stream (held back at a tag)
        self._choices: tuple[Choice, ...] = ()
        self._documents: list[Path] = []  # files to send after the text
        self._shown = ""  # what the chat shows now (message or draft)
        self._message_id: str | None = None  # the streamed message, once sent
        self._drafts = self._private and self._channel.limits.drafts
        self._draft_id = secrets.randbelow(2**31 - 1) + 1
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
        parts = split_message(
            scrub_context(self._text), self._channel.limits.max_units, self._channel.limits.units
        )
        self.message_ids = []
        if parts:
            try:
                await self._deliver(parts)
            except GatewayError as exc:  # every fallback spent: the chat gets no more
                log.warning("reply not delivered: %s: %s", type(exc).__name__, exc)
        for document in self._documents:
            try:
                self.message_ids.append(await self._channel.send_document(document))
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
        view = self._interim_view()
        if not view or view == self._shown or not self._interim:
            return
        self._throttle.used()  # before any await: another reply in the chat waits its turn
        await self._stop_typing()
        try:
            if self._drafts:
                await self._channel.draft(self._draft_id, view)
            elif self._message_id is None:
                self._message_id = await self._channel.send(view, reply_to=self._reply_to)
            else:
                await self._channel.edit(self._message_id, view)
            self._shown = view
            self._throttle.returned()
        except RateLimitedError as exc:  # the chat is paused; the next view goes after
            self._throttle.pause(exc.retry_after)
            self._changed.set()
        except DeliveryError as exc:
            log.info("interim reply update refused: %s", exc)
            if self._drafts:  # no drafts here after all: stream by message edits
                self._drafts = False
                self._changed.set()
            else:
                self._interim = False  # the final delivery sends afresh if need be

    def _interim_view(self) -> str:
        limits = self._channel.limits
        text = self._visible.strip()
        if limits.units(text) <= limits.max_units:
            return text
        # Each character counts at least one unit, so the first part of this many
        # characters is the first part of the whole.
        parts = split_message(text[: limits.max_units + 1], limits.max_units, limits.units)
        return parts[0] if parts else ""

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
                except RateLimitedError:
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

    async def _deliver(self, parts: Sequence[str]) -> None:
        last = len(parts) - 1
        for index, part in enumerate(parts):
            choices = self._choices if index == last else ()
            streamed = index == 0 and self._message_id is not None and not self._drafts
            # An edit carries no buttons: a single part with choices goes as a new message.
            if streamed and not choices and await self._final_edit(part):
                assert self._message_id is not None
                self.message_ids.append(self._message_id)
                continue
            reply_to = self._reply_to if index == 0 else None
            self.message_ids.append(await self._final_send(part, reply_to, choices))

    async def _final_edit(self, text: str) -> bool:
        """The streamed message edited to `text`; False when the edit failed for good."""
        assert self._message_id is not None
        if text == self._shown:
            return True
        for _ in range(self._attempts):
            await self._throttle.wait()
            self._throttle.used()
            try:
                await self._channel.edit(self._message_id, text)
                self._throttle.returned()
                return True
            except RateLimitedError as exc:
                self._throttle.pause(exc.retry_after)
            except DeliveryError as exc:
                log.info("final edit refused, sending afresh: %s", exc)
                return False
        log.info("final edit still rate limited after %d tries, sending afresh", self._attempts)
        return False

    async def _final_send(self, text: str, reply_to: str | None, choices: Sequence[Choice]) -> str:
        """A new message with `text`; raises once flood control outlasts every try."""
        for attempt in range(1, self._attempts + 1):
            try:
                return await self._channel.send(text, reply_to=reply_to, choices=choices)
            except RateLimitedError as exc:
                self._throttle.pause(exc.retry_after)
                if attempt == self._attempts:
                    raise
                await self._sleep(exc.retry_after)
        raise AssertionError("unreachable")  # the loop returns or raises

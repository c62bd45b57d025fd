"""The Telegram adapter: python-telegram-bot updates in, streamed replies out.

It only translates. A private chat's texts and captions, and in groups the
messages addressed to the bot (an @mention, a reply to the bot, a command;
everything with ``group_trigger: all``), become `InboundMessage`s for the
inbox; replies go back through `gateway.delivery` over a `TelegramChannel`, with
link previews off (``link_preview_options``) unless every link in the text is
one the person sent in the session (`gateway.delivery.links`).
Voice notes, audio, video notes, photos and image or audio documents carry
`MediaRef`s (`telegram_media.media_of`; the caption is the text, addressed in
groups like a text), downloaded only when the application asks (`fetch_media`).
Other content (stickers, videos, other files) goes to the inbox marked
`unsupported` (it answers with one line after its access check, and nothing
reaches the model or the store). A forward is marked (``own_words=False``,
``forwarded_from``: `telegram_text.forwarded_from`). Channel posts and messages
of bots are ignored. ``/cmd@otherbot`` in a group is dropped here.

An edit of a person's text or caption (an ``edited_message`` update, asked for
in ``allowed_updates``) goes to the inbox's `edited` as a `MessageEdit`, never as
a new message: no reply, no turn; an edit without a sender is logged in one line
and dropped. Telegram does not tell bots when a message is deleted, so a
deletion never reaches the inbox from here.

Long polling is done by hand, not by PTB's Updater (which confirms a batch as
soon as it fetches the next): the next ``getUpdates``, whose offset confirms
every update below it, waits until each update of the batch was stored by the
inbox (`on_stored`) or finished, so a message is never confirmed before it is
stored and an update left unstored at a crash is delivered again. The loop is
`telegram_polling.LongPoll`: every failed fetch is logged once per kind per
outage and retried with a capped backoff, an update PTB cannot parse is logged
by id, confirmed and skipped, and only a refused token ends it (`done` is set).

Webhook mode (``telegram.webhook.url``) serves our own small server
(`telegram_webhook.WebhookServer`) and registers it with ``setWebhook`` (the
secret token, the allowed updates) at start: each update is handed out exactly
as long polling hands it out, and Telegram's request is answered 200 only once
the update is stored (or done with), 503 when its handling failed before that
or the replica is stopping, so Telegram delivers it again, maybe to another
replica. A stop leaves the webhook set: other replicas still serve it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from telegram import (
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputFile,
    LinkPreviewOptions,
    Message,
    MessageEntity,
    ReplyParameters,
    Update,
    User,
)
from telegram.error import BadRequest, ChatMigrated, InvalidToken, RetryAfter, TelegramError
from telegram.ext import AIORateLimiter, Application, ExtBot

from gateway.adapters.media_download import DOWNLOAD_TIMEOUT, not_fetched
from gateway.adapters.telegram_format import MAX_UNITS, render, utf16_units
from gateway.adapters.telegram_media import TelegramFiles, media_of
from gateway.adapters.telegram_menus import cosmetic, set_menus
from gateway.adapters.telegram_polling import ALLOWED_UPDATES, LongPoll, UpdatesRequest
from gateway.adapters.telegram_text import (
    addressed,
    edited_text,
    forwarded_from,
    without_mention,
)
from gateway.adapters.telegram_webhook import STORE_TIMEOUT, Handling, WebhookServer
from gateway.adapters.webhook_guard import ConnectionLimits
from gateway.config import TelegramConfig
from gateway.delivery import ChannelLimits, StreamedReply, Throttles, images_as_links
from gateway.errors import (
    AdapterFailedError,
    AnswerUnreadableError,
    DeliveryError,
    NotStoredError,
    RateLimitedError,
)
from gateway.messages import (
    Choice,
    CommandSpec,
    InboundMessage,
    Inbox,
    MediaRef,
    MessageEdit,
    ReplySink,
)

log = logging.getLogger(__name__)

CLOSE_WAIT = 2.0  # seconds close() gives handler tasks still running
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)
UNREADABLE_ANSWER = "Invalid server response"  # PTB's TelegramError for a body not JSON
TYPING_DELAY = 0.5  # a reply whose first text comes sooner shows no typing (one call less)
Migrated = Callable[[int, int], Awaitable[None]]


class TelegramChannel:
    """One Telegram chat (and forum topic) as a `gateway.delivery.Channel`."""

    def __init__(
        self,
        bot: ExtBot[Any],
        chat_id: int,
        *,
        thread_id: int | None,
        private: bool,
        edit_interval: float,
        migrated: Migrated,
    ) -> None:
        self._bot, self.chat_id, self._thread_id = bot, chat_id, thread_id
        self._migrated = migrated
        self.limits = ChannelLimits(
            max_units=MAX_UNITS, units=utf16_units, edit_interval=edit_interval, drafts=private
        )

    async def send(
        self,
        text: str,
        *,
        reply_to: str | None = None,
        choices: Sequence[Choice] = (),
        previews: bool = False,
    ) -> str:
        """Send `text` (Markdown, rendered); the new message's id."""
        extra: dict[str, Any] = {"message_thread_id": self._thread_id, **_previews(previews)}
        if reply_to is not None:
            extra["reply_parameters"] = ReplyParameters(
                int(reply_to), allow_sending_without_reply=True
            )
        if choices:
            extra["reply_markup"] = _keyboard(choices)
        return _message_id(await self._rendered(self._bot.send_message, text, extra))

    async def edit(self, message_id: str, text: str, *, previews: bool = False) -> None:
        """Replace a sent message's text; an edit that changes nothing is not an error."""
        extra = {"message_id": int(message_id), **_previews(previews)}
        try:
            await self._rendered(self._bot.edit_message_text, text, extra)
        except DeliveryError as error:
            if "not modified" not in str(error).lower():
                raise

    async def draft(self, draft_id: int, text: str) -> None:
        """Show `text` as the private chat's message draft (streamed preview)."""
        await self._rendered(
            self._bot.send_message_draft,
            text,
            {"draft_id": draft_id, "message_thread_id": self._thread_id},
        )

    async def typing(self) -> None:
        await self._call(
            self._bot.send_chat_action, {"action": "typing", "message_thread_id": self._thread_id}
        )

    async def send_document(self, path: Path) -> str:
        """Send the file at `path` as a document (an /export); the new message's id."""
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except OSError as error:
            raise DeliveryError(f"cannot read {path.name}: {error.strerror}") from None
        document = InputFile(data, filename=path.name)
        extra = {"document": document, "message_thread_id": self._thread_id}
        return _message_id(await self._call(self._bot.send_document, extra))

    async def _rendered(
        self, method: Callable[..., Awaitable[Any]], text: str, extra: dict[str, Any]
    ) -> Any:
        """Send rendered Markdown (images as links); as plain text when Telegram refuses
        the entities."""
        text = images_as_links(text)
        rendered = render(text)
        if rendered.units <= MAX_UNITS and (rendered.entities or rendered.text != text):
            entities = [MessageEntity.de_json(e, None) for e in rendered.entities]
            try:
                return await self._call(
                    method, {**extra, "text": rendered.text, "entities": entities}
                )
            except DeliveryError as error:
                if not _entity_error(error):
                    raise
                log.warning("telegram: entities refused, sending plain text (%s)", error)
        return await self._call(method, {**extra, "text": text})

    async def _call(self, method: Callable[..., Awaitable[Any]], kwargs: dict[str, Any]) -> Any:
        """Call the Bot API for this chat; Telegram's errors as the gateway's."""
        try:
            try:
                return await method(chat_id=self.chat_id, **kwargs)
            except ChatMigrated as moved:
                old, self.chat_id = self.chat_id, moved.new_chat_id
                await self._migrated(old, moved.new_chat_id)
                return await method(chat_id=self.chat_id, **kwargs)
        except RetryAfter as error:
            wait = error.retry_after
            seconds = wait.total_seconds() if isinstance(wait, dt.timedelta) else float(wait)
            raise RateLimitedError(f"Telegram asks to wait {seconds:g} s", seconds) from error
        except TelegramError as error:
            if str(error) == UNREADABLE_ANSWER:  # a 2xx whose body is not JSON
                raise AnswerUnreadableError(f"Telegram's answer is not JSON: {error}") from None
            raise DeliveryError(f"Telegram refused the call: {error}") from error
        except (KeyError, TypeError, AttributeError, ValueError) as error:  # PTB's parsing
            what = f"{type(error).__name__}: {error}"
            raise AnswerUnreadableError(f"Telegram's answer is not one ({what})") from None


class TelegramAdapter:
    """One bot's connection to Telegram (implements `gateway.messages.Adapter`)."""

    platform = "telegram"

    def __init__(
        self,
        config: TelegramConfig,
        *,
        poll_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        backoff: tuple[float, float] = (0.5, 30.0),
        overall_max_rate: float = 30.0,
        download_timeout: float = DOWNLOAD_TIMEOUT,
        store_timeout: float = STORE_TIMEOUT,
    ) -> None:
        """`download_timeout`: seconds one file's download may take
        (``media.download_timeout``); `store_timeout`: seconds a webhook request waits
        for its update to be stored before it is answered 503."""
        self._config, self._poll_timeout, self._clock = config, poll_timeout, clock
        self._store_timeout = store_timeout
        self._files = TelegramFiles(download_timeout)
        self._backoff, self.overall_max_rate = backoff, overall_max_rate
        self.done = asyncio.Event()
        self.ready = asyncio.Event()  # Telegram answered getMe and the set-up calls
        self._throttles = Throttles(config.edit_interval)
        self._app: Application[Any, Any, Any, Any, Any, Any] | None = None
        self._inbox: Inbox | None = None
        self._bot_user: User | None = None
        self._loop: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[bool]] = set()
        self._arriving: dict[tuple[int, int], asyncio.Event] = {}  # set once stored
        self._stopping = asyncio.Event()
        self._poll: LongPoll | None = None
        self._webhook: WebhookServer | None = None

    # ----- the Adapter protocol ----------------------------------------------------

    async def start(self, inbox: Inbox, commands: Sequence[CommandSpec]) -> None:
        """Connect, register the commands menu, and begin taking updates."""
        self._inbox = inbox
        updates_request = UpdatesRequest()
        builder = (
            Application.builder()
            .token(self._config.token or "")
            .base_url(str(self._config.base_url))
            .base_file_url(str(self._config.base_file_url))
            .rate_limiter(AIORateLimiter(overall_max_rate=self.overall_max_rate, max_retries=0))
            .get_updates_request(updates_request)
        )
        webhook = self._config.webhook.url is not None
        app = builder.updater(None).build()
        self._app = app
        try:
            await app.initialize()  # getMe: the one answer that says whether the token is good
        except InvalidToken:
            log.error("telegram: the bot token was refused (check TELEGRAM_BOT_TOKEN)")
            self.done.set()
            return
        except TelegramError as error:
            await self._abandon(app)
            raise AdapterFailedError(f"Telegram did not answer at start: {error}") from error
        try:
            self._bot_user = app.bot.bot
            await set_menus(app.bot, commands)  # cosmetic: never fatal
            if webhook:
                await self._start_webhook(app)
            else:
                await cosmetic(app.bot.delete_webhook)  # a flood wait is waited out
        except TelegramError as error:  # the token was accepted: a refusal is not about it
            await self._abandon(app)
            raise AdapterFailedError(f"Telegram did not answer at start: {error}") from error
        except OSError as error:  # the webhook's address
            await self._abandon(app)
            where = f"{self._config.webhook.listen}:{self._config.webhook.port}"
            raise AdapterFailedError(f"cannot listen for the webhook on {where}: {error}") from None
        if not webhook:
            self._poll = LongPoll(
                app.bot,
                updates_request,
                self._handling,
                timeout=self._poll_timeout,
                stopping=self._stopping,
                clock=self._clock,
                backoff=self._backoff,
            )
            self._loop = asyncio.create_task(self._polled(self._poll), name="telegram-poll")
        self.ready.set()
        log.info(
            "telegram: started as @%s (%s)",
            self._bot_user.username,
            "webhook" if webhook else "polling",
        )

    async def stop(self) -> None:
        """Stop taking updates; the messages being handled go on. Logged once (`close`
        stops again)."""
        already = self._stopping.is_set()
        self._stopping.set()
        self.ready.clear()
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        if not already:
            log.info("telegram: stopped taking updates")

    async def close(self) -> None:
        """Wait briefly for the handlers still running, confirm what was stored, disconnect."""
        await self.stop()
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=CLOSE_WAIT)
            for task in pending:
                task.cancel()
        if self._webhook is not None:  # after the handlers: their requests are answered
            await self._webhook.close()
            self._webhook = None
        app, self._app = self._app, None
        await self._files.close()
        if app is None:
            return
        if self._poll is not None and self._poll.offset:
            with contextlib.suppress(TelegramError):
                await app.bot.get_updates(offset=self._poll.offset, timeout=0, limit=1)
        await app.shutdown()
        log.info("telegram: closed")

    async def notify(self, message: InboundMessage, text: str) -> None:
        """One line in `message`'s chat (and topic), outside any reply."""
        try:
            await self._channel(message).send(text)
        except (DeliveryError, RateLimitedError) as error:
            log.warning("telegram: a notification was not delivered: %s", error)

    async def fetch_media(self, media: MediaRef, max_bytes: int) -> bytes:
        """Download a voice note's or picture's file into memory (`TelegramFiles.fetch`)."""
        if self._app is None:
            raise not_fetched("the Telegram adapter is not connected")
        return await self._files.fetch(self._app.bot, media, max_bytes)

    def reply_sink(self, message: InboundMessage) -> ReplySink:
        return self._sink(message)

    # ----- updates -----------------------------------------------------------------

    async def _polled(self, poll: LongPoll) -> None:
        """Long polling; once it gives up (a refused token), or fails where it cannot
        retry, the adapter is done (and the service exits 1)."""
        try:
            await poll.run()
        except Exception:  # the top of the task: it never ends silently
            log.exception("telegram: polling stopped")
        if not self._stopping.is_set():
            self.done.set()

    async def _start_webhook(self, app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Listen first, then tell Telegram where (its first request finds us up)."""
        webhook, secret = self._config.webhook, self._config.webhook_secret
        assert webhook.url is not None and secret is not None  # the config's validator
        server = WebhookServer(
            app.bot,
            self._handling,
            listen=webhook.listen,
            port=webhook.port,
            path=urlsplit(str(webhook.url)).path,
            secret=secret,
            stopping=self._stopping,
            store_timeout=self._store_timeout,
            limits=ConnectionLimits(
                webhook.header_timeout, webhook.body_timeout, webhook.max_connections
            ),
        )
        await server.start()
        self._webhook = server
        await app.bot.set_webhook(
            str(webhook.url), secret_token=secret, allowed_updates=list(ALLOWED_UPDATES)
        )

    async def _abandon(self, app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """A start that failed: nothing stays open."""
        self._app = None
        if self._webhook is not None:
            await self._webhook.close()
            self._webhook = None
        with contextlib.suppress(TelegramError, RuntimeError):
            await app.shutdown()

    def _handling(self, update: Update) -> Handling:
        """Start handling one update; its `Handling` tells when it is stored or done with,
        and whether it failed (or was cancelled) before it was stored."""
        handling = Handling()
        task = asyncio.create_task(self._handle(update, handling.stored))
        self._tasks.add(task)
        message = update.message
        key = None if message is None else (message.chat.id, message.message_id)
        if key is not None:  # an edit of it waits until it is stored
            self._arriving[key] = handling.done

        def finished(done: asyncio.Task[bool]) -> None:
            self._tasks.discard(done)
            handling.ended(not done.cancelled() and done.result())
            if key is not None and self._arriving.get(key) is handling.done:
                del self._arriving[key]

        task.add_done_callback(finished)
        return handling

    async def _handle(self, update: Update, on_stored: Callable[[], None]) -> bool:
        """One update, from start to end; the top of an adapter task. False: it failed."""
        try:
            if update.callback_query is not None:
                await self._on_callback(update.callback_query, on_stored)
            elif update.message is not None:
                await self._on_message(update.message, on_stored)
            elif update.edited_message is not None:
                await self._on_edit(update.update_id, update.edited_message, on_stored)
        except NotStoredError as exc:  # one line: Telegram sends it again
            log.warning(
                "telegram: update %s not stored; it will come again (%s)", update.update_id, exc
            )
            return False
        except Exception:
            log.exception("telegram: update %s failed", update.update_id)
            return False
        return True

    async def _on_message(self, message: Message, on_stored: Callable[[], None]) -> None:
        inbox, me = self._running()
        if message.migrate_to_chat_id is not None:
            await inbox.chat_migrated(
                "telegram", str(message.chat.id), str(message.migrate_to_chat_id)
            )
            return
        sender = message.from_user
        if (
            sender is None
            or sender.is_bot
            or message.chat.type not in ("private", "group", "supergroup")
        ):
            return
        if not addressed(message, me, self._config.group_trigger):
            return
        text = message.text if message.text is not None else message.caption
        media = media_of(message)  # named only: the application downloads them later
        if media:
            caption = without_mention(message, me, bare=True) if text is not None else ""
            inbound = replace(self._inbound(message, sender, caption), media=media)
        elif text is None:
            if message.effective_attachment is None:
                return
            inbound = replace(self._inbound(message, sender, ""), unsupported=True)
        else:
            inbound = self._inbound(message, sender, without_mention(message, me))
        sink = self._sink(inbound)
        await sink.start()  # typing until the first text; it yields nothing, so order holds
        await inbox.handle(inbound, sink, on_stored)

    async def _on_edit(
        self, update_id: int, message: Message, on_stored: Callable[[], None]
    ) -> None:
        """A person edited a text or caption: the inbox's `edited`, never a new turn. Every
        edit of a person's message goes (one no longer addressed to the bot too: its
        stored text must follow); the inbox ignores one it never stored. The edit of a
        message still being stored here waits for it."""
        inbox, me = self._running()
        sender = message.from_user
        if message.chat.type not in ("private", "group", "supergroup"):
            return
        if sender is None:
            log.warning("telegram: edit in update %s has no sender; dropped", update_id)
            return
        text = edited_text(message, me)
        if sender.is_bot or text is None:
            return
        arriving = self._arriving.get((message.chat.id, message.message_id))
        if arriving is not None:  # its first version is being stored: the edit follows it
            await arriving.wait()
        await inbox.edited(MessageEdit.of(self._inbound(message, sender, text)))
        on_stored()

    async def _on_callback(self, query: CallbackQuery, on_stored: Callable[[], None]) -> None:
        inbox, _ = self._running()
        try:
            await query.answer()
        except TelegramError as error:  # a query of a previous run is too old to answer
            log.info("telegram: a button press could not be answered: %s", error)
        on_stored()
        message = query.message
        if not isinstance(message, Message) or query.data is None:
            return
        inbound = replace(self._inbound(message, query.from_user, ""), press_id=query.id)
        await inbox.choose(inbound, query.data, self._sink(inbound, reply_to=False))

    # ----- translation -------------------------------------------------------------

    def _inbound(self, message: Message, sender: User, text: str) -> InboundMessage:
        _, me = self._running()
        topic = message.message_thread_id if message.is_topic_message else None
        reply = message.reply_to_message
        return InboundMessage(
            platform="telegram",
            chat_id=str(message.chat.id),
            chat_type="private" if message.chat.type == "private" else "group",
            user_id=str(sender.id),
            text=text,
            message_id=str(message.message_id),
            user_name=sender.full_name or sender.username or str(sender.id),
            thread_id=str(topic) if topic is not None else None,
            bot_username=me.username,
            reply_to_id=str(reply.message_id) if reply is not None else None,
            own_words=message.forward_origin is None,  # a forward is someone else's words
            forwarded_from=forwarded_from(message),
            language=sender.language_code or None,
        )

    def _channel(self, message: InboundMessage) -> TelegramChannel:
        app = self._app
        if app is None:
            raise DeliveryError("the Telegram adapter is not connected")
        return TelegramChannel(
            app.bot,
            int(message.chat_id),
            thread_id=int(message.thread_id) if message.thread_id else None,
            private=message.chat_type == "private",
            edit_interval=self._config.edit_interval,
            migrated=self._migrated,
        )

    def _sink(self, message: InboundMessage, reply_to: bool = True) -> StreamedReply:
        return StreamedReply(
            self._channel(message),
            self._throttles.for_chat(message.chat_id),  # Telegram's limits are per chat
            reply_to=message.message_id if reply_to else None,
            private=message.chat_type == "private",
            typing_delay=TYPING_DELAY,
        )

    async def _migrated(self, old: int, new: int) -> None:
        inbox, _ = self._running()
        log.info("telegram: chat %s moved to %s", old, new)
        await inbox.chat_migrated("telegram", str(old), str(new))

    def _running(self) -> tuple[Inbox, User]:
        if self._inbox is None or self._bot_user is None:
            raise DeliveryError("the Telegram adapter is not started")
        return self._inbox, self._bot_user


def _message_id(answer: Any) -> str:
    """The id of the message a send answered with (its answer not a message: unreadable)."""
    if not isinstance(answer, Message):
        raise AnswerUnreadableError(f"Telegram's answer is not a message: {answer!r:.80}")
    return str(answer.message_id)


def _previews(previews: bool) -> dict[str, Any]:
    """The call's link preview option: Telegram's default (shown), or none at all."""
    return {} if previews else {"link_preview_options": NO_PREVIEW}


def _keyboard(choices: Sequence[Choice]) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(c.label, callback_data=c.payload)] for c in choices]
    )


def _entity_error(error: DeliveryError) -> bool:
    cause = error.__cause__
    text = str(cause).lower()
    return isinstance(cause, BadRequest) and ("entit" in text or "parse" in text)

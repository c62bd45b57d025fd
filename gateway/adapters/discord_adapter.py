"""The Discord adapter: discord.py messages in, streamed replies out.

It only translates. Direct messages, and in servers the messages that mention
the bot (a user mention, not @everyone or a role) or reply to one of its
messages, become `InboundMessage`s for the inbox; so does every message in a
thread the bot takes part in (one it opened, joined, or was addressed in). A
thread is its own session: ``thread_id`` is the thread, ``chat_id`` its parent
channel. The bot's mention is cut from the text. Voice messages, audio and
image attachments carry `MediaRef`s (`discord_media.media_of`; the text is the
caption), downloaded only when the application asks (`fetch_media`). A mention
with no text, and other attachments without text (marked `unsupported`), get
one line from the inbox after its access check; neither reaches the model or
the store. Messages of
bots (itself included), webhooks and system messages are ignored, and so is
every message from a server outside ``discord.allowed_guilds`` when that list
is set. Who may talk to the bot is
decided by the inbox, not here. A forward carries its snapshot's text, marked
(``own_words=False``, ``forwarded_from``: `discord_forwards`). A person's edit of
a message's text and a deletion (one or in bulk) go to the inbox's `edited`
(`discord_edits`), never as a new message; one of a message still being stored
waits for it.

Replies go through `gateway.delivery` over a `DiscordChannel`: Markdown passed
through (Discord renders it), 2,000 characters a message, no mention ever pings
(``allowed_mentions`` parses none, and ``@everyone``/``@here`` are broken with a
zero-width space as well), Markdown images sent as links, and link embeds
suppressed (SUPPRESS_EMBEDS, on sends and edits) unless every link in the text is
one the person sent in the session (`gateway.delivery.links`). Slash commands
and button clicks are handled by ``discord_commands.DiscordCommands``, which this
adapter builds on its client.

The client asks for the guilds, guild messages, direct messages and message
content intents; the last is privileged and must be enabled in the developer
portal, else Discord refuses the connection and start logs one line saying so.
discord.py reconnects and resumes on its own; Discord never redelivers a
message, so nothing is confirmed after it is stored. A gateway event that
discord.py cannot parse (a MESSAGE_CREATE without ``type``, say) fails alone: it
is logged with its type and id and dropped, and the connection goes on (only an
unreadable READY or RESUMED still ends it, since nothing works without them).
With ``discord.shard_count`` (or several ``replicas``) the client runs only this
process's shards (`discord_shards`), and only replica 0 syncs the slash commands.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import discord

from gateway.adapters.discord_client import (
    ClientEvents,
    Deletion,
    EventClient,
    ShardedClient,
    intents,
)
from gateway.adapters.discord_commands import (
    DiscordCommands,
    Lines,
    attachment,
    choice_view,
    hinted_lines,
    mapped_errors,
)
from gateway.adapters.discord_edits import deletions_of, edit_of, without_mention
from gateway.adapters.discord_endpoints import (
    DiscordEndpoints,
    restore_discord_endpoints,
    use_discord_endpoints,
)
from gateway.adapters.discord_forwards import forward_of
from gateway.adapters.discord_media import DiscordFiles, media_of
from gateway.adapters.discord_shards import DiscordShards, discord_shards
from gateway.adapters.media_download import DOWNLOAD_TIMEOUT
from gateway.config import DiscordConfig, ReplicasConfig
from gateway.delivery import ChannelLimits, StreamedReply, Throttles, images_as_links
from gateway.errors import AdapterFailedError, DeliveryError, RateLimitedError
from gateway.i18n import DEFAULT_LANGUAGE, Catalogs
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

MAX_CHARS = 2000
INTENT_LINE = (
    "discord: Discord refused the message content intent; enable 'Message Content Intent' "
    "for this bot in the developer portal (Applications > your bot > Bot > Privileged "
    "Gateway Intents), then restart"
)
EMPTY_CONTENT_LINE = (
    "discord: server messages arrive without their text; enable 'Message Content Intent' "
    "for this bot in the developer portal (Bot tab), then restart"
)
CLOSE_WAIT = 2.0  # seconds close() gives message handlers still running
TYPING_DELAY = 0.5  # a reply whose first text comes sooner shows no typing
READY_TIMEOUT = 60.0  # seconds start() waits for the gateway's READY
# discord.py sleeps through shorter 429 waits itself; a longer one surfaces as
# RateLimitedError (30 s is the least discord.py accepts)
MAX_RATELIMIT_WAIT = 30.0
_ANSWERED_TYPES = (discord.MessageType.default, discord.MessageType.reply)
_MASS_MENTION = re.compile(r"@(everyone|here)")
_NO_PINGS = discord.AllowedMentions.none()


def defuse_mentions(text: str) -> str:
    """``@everyone``/``@here`` with a zero-width space after the ``@``: they cannot ping."""
    return _MASS_MENTION.sub("@\u200b\\1", text)


def discord_units(text: str) -> int:
    """The length Discord counts for `text` once sent (after `defuse_mentions`)."""
    return len(text) + len(_MASS_MENTION.findall(text))


class SlashCommands(Protocol):
    """What the adapter needs of `DiscordCommands` (a test may give a stand-in)."""

    async def sync(self) -> None: ...

    async def on_interaction(self, interaction: discord.Interaction) -> None: ...


CommandsFactory = Callable[
    [discord.Client, Inbox, Sequence[CommandSpec], DiscordConfig, Lines], SlashCommands | None
]


def _slash_commands(
    client: discord.Client,
    inbox: Inbox,
    commands: Sequence[CommandSpec],
    config: DiscordConfig,
    lines: Lines,
) -> SlashCommands:
    return DiscordCommands(client, inbox, commands, config, lines=lines)


class DiscordChannel:
    """One Discord channel, thread or DM as a `gateway.delivery.Channel`."""

    def __init__(self, client: discord.Client, channel_id: int, edit_interval: float) -> None:
        self.channel_id = channel_id
        self._target = client.get_partial_messageable(channel_id)
        # The messages this channel sent: an edit through one can set its flags (embeds
        # suppressed or not), which an edit through a partial message cannot.
        self._sent: dict[int, discord.Message] = {}
        self.limits = ChannelLimits(
            max_units=MAX_CHARS, units=discord_units, edit_interval=edit_interval, drafts=False
        )

    async def send(
        self,
        text: str,
        *,
        reply_to: str | None = None,
        choices: Sequence[Choice] = (),
        previews: bool = False,
    ) -> str:
        """Send `text` (Markdown as is but images as links; no mention pings; embeds
        suppressed unless `previews`); the new message's id."""
        extra: dict[str, Any] = {}
        if reply_to is not None:
            extra["reference"] = discord.MessageReference(
                message_id=int(reply_to), channel_id=self.channel_id, fail_if_not_exists=False
            )
            extra["mention_author"] = False
        if choices:
            extra["view"] = choice_view(choices)
        content = defuse_mentions(images_as_links(text))
        with mapped_errors():
            message = await self._target.send(
                content, allowed_mentions=_NO_PINGS, suppress_embeds=not previews, **extra
            )
        self._sent[message.id] = message
        return str(message.id)

    async def edit(self, message_id: str, text: str, *, previews: bool = False) -> None:
        """Replace a sent message's text, its embeds suppressed unless `previews`."""
        content = defuse_mentions(images_as_links(text))
        with mapped_errors():
            message = self._sent.get(int(message_id))
            if message is None:  # not sent through this channel: read it first
                message = await self._target.get_partial_message(int(message_id)).fetch()
            edited = await message.edit(
                content=content, allowed_mentions=_NO_PINGS, suppress=not previews
            )
        self._sent[edited.id] = edited

    async def draft(self, draft_id: int, text: str) -> None:
        raise DeliveryError("Discord has no message drafts")

    async def typing(self) -> None:
        with mapped_errors():
            await self._target.typing()

    async def send_document(self, path: Path) -> str:
        """Send the file at `path` as an attachment (an /export); the new message's id."""
        file = attachment(path)
        try:
            with mapped_errors():
                message = await self._target.send(file=file, allowed_mentions=_NO_PINGS)
        finally:
            file.close()
        return str(message.id)


class DiscordAdapter:
    """One bot's connection to Discord (implements `gateway.messages.Adapter`)."""

    platform = "discord"

    def __init__(
        self,
        config: DiscordConfig,
        *,
        guild_ready_timeout: float = 2.0,
        ready_timeout: float = READY_TIMEOUT,
        commands_factory: CommandsFactory | None = _slash_commands,
        language: str = DEFAULT_LANGUAGE,
        download_timeout: float = DOWNLOAD_TIMEOUT,
        replicas: ReplicasConfig | None = None,
    ) -> None:
        """`guild_ready_timeout`: discord.py's wait for server data before READY (tests
        shorten it); `commands_factory` builds the slash commands from the menu given
        at start (None: none); `language`: the bot's default (``locale.language``), for
        the adapter's own lines to a person whose Discord is in no shipped language;
        `download_timeout`: seconds one attachment's download may take
        (``media.download_timeout``); `replicas`: which replica this is, for its shards
        and whether it syncs the slash commands (`discord_shards`; None: the only one)."""
        self._config = config
        self.shards: DiscordShards = discord_shards(config, replicas or ReplicasConfig())
        self._files = DiscordFiles(download_timeout)
        self._lines = hinted_lines(Catalogs(), language)
        self._guild_ready_timeout, self._ready_timeout = guild_ready_timeout, ready_timeout
        self._commands_factory = commands_factory
        self.done = asyncio.Event()
        self.ready = asyncio.Event()  # READY came (cleared while the gateway is down)
        self._throttles = Throttles(config.edit_interval)
        self._client: EventClient | None = None
        self._runner: asyncio.Task[None] | None = None
        self._inbox: Inbox | None = None
        self._slash: SlashCommands | None = None
        self._endpoints: DiscordEndpoints | None = None
        self._stopping = False
        self._threads: set[int] = set()  # threads the bot was addressed in
        self._tasks: set[asyncio.Task[Any]] = set()
        self._arriving: dict[int, asyncio.Event] = {}  # messages being stored, by id
        self._warned_empty = False

    # ----- the Adapter protocol ----------------------------------------------------

    async def start(self, inbox: Inbox, commands: Sequence[CommandSpec]) -> None:
        """Log in, connect to the gateway and wait for READY (bounded); `commands`
        become the slash commands."""
        self._inbox = inbox
        self._endpoints = use_discord_endpoints(self._config.api_base, self._config.gateway_url)
        shards = self.shards
        sharding: dict[str, Any] = {}
        if shards.sharded:
            sharding["shard_count"] = shards.count
            if shards.ids is not None:
                sharding["shard_ids"] = list(shards.ids)
        events = ClientEvents(
            self.ready,
            self._setup,
            self._on_message,
            self._on_interaction,
            self._on_edit,
            self._on_delete,
        )
        client = (ShardedClient if shards.sharded else EventClient)(
            events,
            **sharding,
            intents=intents(),
            guild_ready_timeout=self._guild_ready_timeout,
            chunk_guilds_at_startup=False,
            member_cache_flags=discord.MemberCacheFlags.none(),
            max_ratelimit_timeout=MAX_RATELIMIT_WAIT,
            allowed_mentions=_NO_PINGS,
        )
        self._client = client
        if self._commands_factory is not None:
            self._slash = self._commands_factory(client, inbox, commands, self._config, self._lines)
        runner = asyncio.create_task(client.start(self._config.token or ""), name="discord")
        self._runner = runner
        ready = asyncio.create_task(self.ready.wait())
        await asyncio.wait(
            {runner, ready}, timeout=self._ready_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        ready.cancel()
        if self.ready.is_set():
            runner.add_done_callback(self._ended)
            me = client.user
            log.info("discord: started as %s (%d servers%s)", me, len(client.guilds), _of(shards))
            return
        await self._failed_start(runner)

    async def stop(self) -> None:
        """Stop taking messages; those being handled go on."""
        self._stopping = True
        log.info("discord: stopped taking messages")

    async def close(self) -> None:
        """Wait briefly for the handlers still running, then disconnect."""
        self._stopping = True
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=CLOSE_WAIT)
            for task in pending:
                task.cancel()
        await self._disconnect()
        await self._files.close()
        log.info("discord: closed")

    async def notify(self, message: InboundMessage, text: str) -> None:
        """One line in `message`'s channel (or thread), outside any reply."""
        try:
            await self._channel(message).send(text)
        except (DeliveryError, RateLimitedError) as error:
            log.warning("discord: a notification was not delivered: %s", error)

    async def fetch_media(self, media: MediaRef, max_bytes: int) -> bytes:
        """Download an attachment into memory (`DiscordFiles.fetch`)."""
        return await self._files.fetch(media, max_bytes)

    def reply_sink(self, message: InboundMessage) -> ReplySink:
        return self._sink(message)

    # ----- start and end -----------------------------------------------------------

    async def _setup(self) -> None:
        """discord.py's setup hook: logged in, not yet connected; sync slash commands."""
        if self._slash is None:
            return
        if not self.shards.sync_commands:
            log.info("discord: slash commands are synced by replica 0, not this one")
            return
        try:
            await self._slash.sync()
        except discord.DiscordException as error:  # the bot still answers messages
            log.warning("discord: slash commands were not synced: %s", error)

    async def _failed_start(self, runner: asyncio.Task[None]) -> None:
        if not runner.done():
            await self._disconnect()
            raise AdapterFailedError(f"Discord did not connect within {self._ready_timeout:g} s")
        error = runner.exception()
        await self._disconnect()
        if isinstance(error, discord.LoginFailure):
            log.error("discord: the bot token was refused (check DISCORD_BOT_TOKEN)")
            self.done.set()
            return
        if isinstance(error, discord.PrivilegedIntentsRequired):
            log.error(INTENT_LINE)
            self.done.set()
            return
        reason = f"{type(error).__name__}: {error}" if error else "the client stopped"
        raise AdapterFailedError(f"Discord did not answer at start: {reason}") from error

    def _ended(self, runner: asyncio.Task[None]) -> None:
        """The client stopped by itself (not by close): the adapter is done."""
        error = None if runner.cancelled() else runner.exception()
        if self._stopping:
            return
        if isinstance(error, discord.PrivilegedIntentsRequired):
            log.error(INTENT_LINE)
        elif error is not None:
            log.error("discord: the connection ended for good: %s: %s", type(error).__name__, error)
        else:
            log.error("discord: the connection ended")
        self.done.set()

    async def _disconnect(self) -> None:
        client, runner = self._client, self._runner
        self._runner = None
        if client is not None and not client.is_closed():
            await client.close()
        if runner is not None:  # its error, if any, is read by _failed_start or _ended
            await asyncio.wait({runner}, timeout=CLOSE_WAIT)
            if not runner.done():
                runner.cancel()
                await asyncio.wait({runner})
        if self._endpoints is not None:
            restore_discord_endpoints(self._endpoints)
            self._endpoints = None

    # ----- messages ----------------------------------------------------------------

    async def _on_message(self, message: discord.Message) -> None:
        """One message, from start to end; the top of an adapter callback."""
        if self._stopping:
            return
        arriving = self._arriving[message.id] = asyncio.Event()  # set once stored
        try:
            await self._tracked(self._handle(message, arriving.set), f"message {message.id}")
        finally:
            arriving.set()
            if self._arriving.get(message.id) is arriving:
                del self._arriving[message.id]

    async def _on_edit(self, event: discord.RawMessageUpdateEvent) -> None:
        """A message's text was edited: the inbox's `edited` (never a new turn), once the
        message, if it is still arriving, is stored."""
        if self._stopping or self._client is None:
            return
        edit = edit_of(event, self._client, self._wanted)
        if edit is not None:
            await self._tracked(self._edited([edit]), f"edit of message {event.message_id}")

    async def _on_delete(self, event: Deletion) -> None:
        """Messages were deleted: each goes to the inbox's `edited` with no text."""
        if self._stopping or self._client is None:
            return
        guilds = tuple(self._config.allowed_guilds)
        deleted = deletions_of(event, self._client, self._wanted, guilds)
        if deleted:
            await self._tracked(self._edited(deleted), f"deletion in channel {event.channel_id}")

    async def _edited(self, edits: list[MessageEdit]) -> None:
        inbox, _ = self._running()
        for edit in edits:
            arriving = self._arriving.get(int(edit.message_id))
            if arriving is not None:  # its first version is being stored: the edit follows
                await arriving.wait()
            await inbox.edited(edit)

    async def _tracked(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Run `work` as one of the handlers `close` waits for; the top of an adapter
        callback: an error is logged with its traceback."""
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await work
        except Exception:
            log.exception("discord: %s failed", what)
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def _handle(self, message: discord.Message, on_stored: Callable[[], None]) -> None:
        inbox, me = self._running()
        if not self._wanted(message):
            return
        addressed = _mentions(message, me) or _replies_to(message, me)
        if not addressed and not self._in_our_thread(message, me):
            self._check_content(message)
            return
        if isinstance(message.channel, discord.Thread):
            self._threads.add(message.channel.id)
        text = without_mention(message.content, me)
        inbound = self._inbound(message, text)
        forward = None if self._client is None else forward_of(message, self._client)
        if forward is not None:  # the snapshot's text is someone else's words
            text = forward.text
            inbound = replace(inbound, text=text, own_words=False, forwarded_from=forward.origin)
        media = media_of(message)  # named only: the application downloads them later
        if media:
            inbound = replace(inbound, media=media)
        elif not text:
            if message.attachments or message.stickers:
                inbound = replace(inbound, unsupported=True)
            elif not addressed:
                return
        sink = self._sink(inbound)
        await sink.start()
        try:
            await inbox.handle(inbound, sink, on_stored)  # Discord never redelivers a message
        finally:
            await sink.finish()

    def _wanted(self, message: discord.Message) -> bool:
        """Not from a bot, webhook or the system; from an allowed server (or a DM)."""
        if message.author.bot or message.webhook_id is not None:
            return False
        if message.type not in _ANSWERED_TYPES:
            return False
        guilds = self._config.allowed_guilds
        return message.guild is None or not guilds or str(message.guild.id) in guilds

    def _in_our_thread(self, message: discord.Message, me: discord.ClientUser) -> bool:
        """A DM, or a thread the bot opened, joined or was addressed in."""
        channel = message.channel
        if message.guild is None:
            return True
        if not isinstance(channel, discord.Thread):
            return False
        return channel.id in self._threads or channel.owner_id == me.id or channel.me is not None

    def _check_content(self, message: discord.Message) -> None:
        """Once: a server message with no text at all means the intent is missing."""
        empty = not (message.content or message.attachments or message.embeds or message.stickers)
        if empty and not self._warned_empty:
            self._warned_empty = True
            log.warning(EMPTY_CONTENT_LINE)

    async def _on_interaction(self, interaction: discord.Interaction) -> None:
        if self._stopping or self._slash is None:
            return
        try:
            await self._slash.on_interaction(interaction)
        except Exception:
            log.exception("discord: interaction %s failed", interaction.id)

    # ----- translation -------------------------------------------------------------

    def _inbound(self, message: discord.Message, text: str) -> InboundMessage:
        _, me = self._running()
        channel = message.channel
        thread = channel if isinstance(channel, discord.Thread) else None
        reference = message.reference
        return InboundMessage(
            platform="discord",
            chat_id=str(thread.parent_id if thread is not None else channel.id),
            chat_type="private" if message.guild is None else "group",
            user_id=str(message.author.id),
            text=text,
            message_id=str(message.id),
            user_name=message.author.display_name,
            thread_id=str(thread.id) if thread is not None else None,
            bot_username=me.name,
            reply_to_id=str(reference.message_id)
            if reference is not None and reference.message_id is not None
            else None,
        )

    def _channel(self, message: InboundMessage) -> DiscordChannel:
        if self._client is None:
            raise DeliveryError("the Discord adapter is not connected")
        target = message.thread_id or message.chat_id
        return DiscordChannel(self._client, int(target), self._config.edit_interval)

    def _sink(self, message: InboundMessage, reply_to: bool = True) -> StreamedReply:
        channel = self._channel(message)
        return StreamedReply(
            channel,
            self._throttles.for_chat(str(channel.channel_id)),  # edits are limited per channel
            reply_to=message.message_id if reply_to else None,
            private=message.chat_type == "private",
            typing_delay=TYPING_DELAY,
        )

    def _running(self) -> tuple[Inbox, discord.ClientUser]:
        client = self._client
        if self._inbox is None or client is None or client.user is None:
            raise DeliveryError("the Discord adapter is not started")
        return self._inbox, client.user


def _of(shards: DiscordShards) -> str:
    """ ", shards 1, 3 of 4" for the start line; nothing without sharding."""
    if not shards.sharded:
        return ""
    ids = shards.ids if shards.ids is not None else range(shards.count or 0)
    return f", shards {', '.join(map(str, ids))} of {shards.count}"


def _mentions(message: discord.Message, me: discord.ClientUser) -> bool:
    """The bot is mentioned as a user (not @everyone, @here or a role)."""
    return me.id in message.raw_mentions


def _replies_to(message: discord.Message, me: discord.ClientUser) -> bool:
    reference = message.reference
    resolved = reference.resolved if reference is not None else None
    return isinstance(resolved, discord.Message) and resolved.author.id == me.id

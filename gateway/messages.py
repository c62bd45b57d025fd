"""The vocabulary that adapters and the application share.

Adapters turn platform events into `InboundMessage` and write replies to a
`ReplySink` (a `ChoiceSink` shows a command's `Choice`s as buttons); they
get the command menu as `CommandSpec`s and know nothing of storage or the
agent. The application reads each message's `MessageIdentity` once: who
sent it, which session it belongs to, and what that session may recall.
Importing this module loads no storage and no safety scanner.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from memory_core import ChatType, SearchScope, make_user_key, recall_scope

MediaKind = Literal["voice", "audio", "image"]
MEDIA_KINDS: tuple[MediaKind, ...] = ("voice", "audio", "image")


@dataclass(frozen=True)
class MediaRef:
    """A voice note, an audio file or a picture a message carried, as the platform names it:
    nothing is downloaded until the application asks the adapter (`Adapter.fetch_media`).
    Plain values only, so a queued message keeps it (`gateway.session_queue`)."""

    kind: MediaKind
    ref: str
    """The platform's handle: Telegram's ``file_id``, a Discord attachment's URL."""
    mime: str | None = None
    size: int | None = None
    """Its size in bytes as the platform reports it (None: not said; the download is
    capped all the same)."""
    seconds: float | None = None
    """A voice note's or an audio file's length as the platform reports it."""
    name: str | None = None  # the file's name, when it has one


@dataclass(frozen=True)
class InboundMessage:
    """One message from a person, whatever the platform."""

    platform: str
    chat_id: str
    chat_type: ChatType
    user_id: str
    text: str
    message_id: str | None = None
    user_name: str | None = None
    thread_id: str | None = None
    bot_username: str | None = None
    """The bot's own name on the platform (Telegram's @username), when the adapter knows
    it: in a group, "/x@<bot_username>" is addressed to this bot."""
    reply_to_id: str | None = None  # the platform id of the message this one replies to
    own_words: bool = True
    """False when the text is not the person's own (a forwarded message): the background
    jobs never learn about the person from it. Quoted lines ("> ") inside the person's own
    text stay in it; the learning check leaves them out."""
    forwarded_from: str | None = None
    """Who or where a forwarded message came from, as the platform gave it (a person's
    name, a chat's or channel's title, "another channel"); "" for a forward whose origin
    was not given, None for a message that is no forward. Set with ``own_words=False``;
    `stored_text` marks the text with it."""
    language: str | None = None
    """The platform's hint of the person's language (Telegram's ``language_code``, the
    locale of a Discord interaction), as the platform gave it; None when it gave none."""
    unsupported: bool = False
    """The message carried what the bot cannot read (a sticker, a file that is neither
    sound nor a picture): the person gets one line, and nothing reaches the model or the
    store."""
    media: tuple[MediaRef, ...] = ()
    """Voice notes, audio and pictures it carried (`text` is then the caption, maybe
    empty); the application downloads, transcribes or shows them to the model."""
    press_id: str | None = None
    """For a button press: the platform's own id of that press (Telegram's callback query
    id), so a press delivered twice is told from a second press; None otherwise."""

    @property
    def user_key(self) -> str:
        """The owner key of this person's data: ``<platform>-<user id>``."""
        return make_user_key(self.platform, self.user_id)

    def session_key(self) -> str:
        """``<platform>:<chat type>:<chat id>[:<thread id>][:<user id in groups>]``."""
        parts = [self.platform, self.chat_type, self.chat_id]
        if self.thread_id:
            parts.append(self.thread_id)
        if self.chat_type == "group":  # in a group each person has a session of their own
            parts.append(self.user_id)
        return ":".join(parts)


FORWARD_MARK = "[Forwarded message{origin}; not the person's own words]"
_ORIGIN_CHARS = 80  # of a forward's origin in its mark: a name or a title, not a text
_NOT_IN_MARK = re.compile(r"[\[\]\s]+")


def stored_text(message: InboundMessage) -> str:
    """`message`'s text as a turn stores it and the model reads it: a forward's text under
    a one-line mark naming its origin, e.g. "[Forwarded message, from Alice Smith; not the
    person's own words]" (brackets and line breaks in the origin become spaces, so a name
    cannot close the mark early); any other message's text as it is."""
    if message.forwarded_from is None:
        return message.text
    origin = _NOT_IN_MARK.sub(" ", message.forwarded_from).strip()[:_ORIGIN_CHARS].strip()
    mark = FORWARD_MARK.format(origin=f", from {origin}" if origin else "")
    return f"{mark}\n{message.text}" if message.text else mark


@dataclass(frozen=True)
class MessageEdit:
    """A person edited one of their messages, or it was deleted, as the platform told us
    (Telegram's ``edited_message``, Discord's message edit and delete events).

    The stored message becomes the new text, and what it alone supported in the
    person's memory is withdrawn (`Conversations.edited`)."""

    platform: str
    chat_id: str
    chat_type: ChatType
    message_id: str
    """The platform's id of the edited or deleted message."""
    text: str | None
    """The new text; None when the message was deleted."""
    user_id: str | None = None
    """The author, when the platform says (a Discord deletion does not)."""
    thread_id: str | None = None

    @property
    def user_key(self) -> str | None:
        return None if self.user_id is None else make_user_key(self.platform, self.user_id)

    @classmethod
    def of(cls, message: InboundMessage) -> MessageEdit:
        """The edit that makes `message` (as its platform now shows it, its `message_id`
        that of the edited one) its stored message's new text."""
        assert message.message_id is not None, "an edited message has its platform id"
        return cls(
            platform=message.platform,
            chat_id=message.chat_id,
            chat_type=message.chat_type,
            message_id=message.message_id,
            text=message.text,
            user_id=message.user_id,
            thread_id=message.thread_id,
        )


@dataclass(frozen=True)
class Choice:
    """One option offered with a reply; `payload` comes back when it is picked."""

    label: str
    payload: str


CHOICE_PREFIX = "choice:"
"""Every `Choice.payload` starts with it, so an adapter can tell a choice's button apart."""


@dataclass(frozen=True)
class CommandArgument:
    """An argument a command takes, for the platforms that declare them (slash options)."""

    name: str
    description: str
    required: bool = False


@dataclass(frozen=True)
class CommandText:
    """A command's menu text in one language: its line, and its arguments' descriptions
    in the order of `CommandSpec.arguments`."""

    description: str
    arguments: tuple[str, ...] = ()


@dataclass(frozen=True)
class CommandSpec:
    """What a platform's command menu shows of one command: its name, one line, and its
    arguments (Discord's slash options).

    `description` and the arguments' are in the bot's default language (the config's
    ``locale.language``); `translations` holds the same text in each shipped language
    (language -> `CommandText`), for the platforms that show a menu per language. Names
    are never translated.
    """

    name: str
    description: str
    arguments: tuple[CommandArgument, ...] = ()
    translations: Mapping[str, CommandText] = field(default_factory=dict, hash=False)

    def text(self, language: str) -> CommandText:
        """The menu text in `language` (the default text when it has none)."""
        found = self.translations.get(language)
        if found is not None:
            return found
        return CommandText(self.description, tuple(a.description for a in self.arguments))


@dataclass(frozen=True)
class MessageIdentity:
    """Who sent a message and where it belongs, read once when it arrives and passed down.

    `session_key` routes it to its session (one lock, one conversation);
    `user_key` owns what the bot keeps of the person; `scope` is what that
    session may recall ("in a thread only that thread; in a group only that
    group; in a direct chat all of mine outside threads", `memory_core.recall_scope`).
    """

    platform: str
    user_id: str
    user_key: str
    chat_id: str
    chat_type: ChatType
    thread_id: str | None
    session_key: str
    scope: SearchScope

    @classmethod
    def of(cls, message: InboundMessage) -> MessageIdentity:
        """`message`'s identity."""
        user_key = message.user_key
        return cls(
            platform=message.platform,
            user_id=message.user_id,
            user_key=user_key,
            chat_id=message.chat_id,
            chat_type=message.chat_type,
            thread_id=message.thread_id,
            session_key=message.session_key(),
            scope=recall_scope(user_key, message.chat_id, message.chat_type, message.thread_id),
        )


class ReplySink(Protocol):
    """Where one reply goes: streamed pieces, then the end."""

    async def write(self, piece: str) -> None: ...

    async def finish(self) -> None: ...


@runtime_checkable
class ChoiceSink(Protocol):
    """A reply sink that can show choices as buttons (after the reply's text).

    Sinks without it get the choices only as numbered text, answered with
    ``/<command> #N``.
    """

    async def offer(self, choices: tuple[Choice, ...]) -> None: ...


@runtime_checkable
class DocumentSink(Protocol):
    """A reply sink that can send a file with the reply (a platform that sends files)."""

    async def attach(self, path: Path) -> None:
        """Send the file at `path` after the reply's text."""


MessageHandler = Callable[[InboundMessage, ReplySink], Awaitable[None]]

Notifier = Callable[[InboundMessage, str], Awaitable[None]]
"""Send one line to the chat a message came from, outside any reply (a review's summary)."""


class Inbox(Protocol):
    """Where an adapter hands what people send (the application's `Conversations`)."""

    async def handle(
        self, message: InboundMessage, sink: ReplySink, on_stored: Callable[[], None] | None = None
    ) -> None:
        """Answer `message` through `sink`; `on_stored` once the message cannot be lost
        (the adapter confirms the platform's update then, not before)."""

    async def choose(self, message: InboundMessage, payload: str, sink: ReplySink) -> None:
        """Apply a pressed button: `payload` of a `Choice` the adapter rendered."""

    async def edited(self, edit: MessageEdit) -> None:
        """A person edited or deleted a message of theirs (see `MessageEdit`)."""

    async def chat_migrated(self, platform: str, old_chat_id: str, new_chat_id: str) -> None:
        """A group became another chat (Telegram: group to supergroup); its sessions and
        memory follow it."""


class Adapter(Protocol):
    """One platform's connection, as `mnemo run` drives it.

    `start` connects and begins taking updates, handing each to the inbox (and
    returns once it runs); `stop` stops taking new updates (messages being
    handled go on); `close` releases the connection, after the application
    drained the work in flight. `done` is set when the adapter ends by itself
    (the console at end of input), which stops the application. `ready` is set
    while the platform is connected (Telegram answered, Discord sent READY): the
    application's /healthz reads it.
    """

    platform: str
    done: asyncio.Event
    ready: asyncio.Event

    async def start(self, inbox: Inbox, commands: Sequence[CommandSpec]) -> None:
        """Connect and take updates; `commands` are the menu (everyone's commands)."""

    async def stop(self) -> None: ...

    async def close(self) -> None: ...

    async def notify(self, message: InboundMessage, text: str) -> None:
        """Send one line to `message`'s chat, outside any reply (a review's summary)."""

    async def fetch_media(self, media: MediaRef, max_bytes: int) -> bytes:
        """Download `media` (one of a message this adapter made) into memory, at most
        `max_bytes`: raises `MediaTooLargeError` past it (also when the platform's size
        says so, before downloading) and `MediaDownloadError` when the platform cannot give
        it (gone, refused, timed out). Runs on the event loop without blocking it."""

    def reply_sink(self, message: InboundMessage) -> ReplySink:
        """A sink that answers `message` in its chat, as if it had just arrived (used at
        start-up for a message stored but not answered before the restart)."""

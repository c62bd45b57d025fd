"""A fake Telegram Bot API server on 127.0.0.1 that the real python-telegram-bot talks to.

Point PTB at it with ``base_url=tg.url + "/bot"`` and ``base_file_url=tg.url + "/file/bot"``.
It speaks the wire format PTB expects (form-encoded requests whose values are JSON,
``{"ok": ..., "result": ...}`` envelopes, errors decided by the HTTP status) and keeps
what a user would see in each chat: message ids are allocated per chat, edits replace
the text, deletes remove the message. Like Telegram, surrounding whitespace is trimmed
(ASCII whitespace here, an approximation) before texts are stored, compared for "not
modified" and measured; ``parse_mode`` is not interpreted, so markup counts as text.

Tests inject updates (`inject_text`, `inject_command`, `inject_callback_query`,
`inject_migration`, `inject_edit` of a text or caption, forum topics through
``message_thread_id``/``is_topic_message`` fields, ...), read the state
(`chat_messages`, `calls`, `commands`, `drafts`, `webhook`) and wait for the bot
(`wait_for`). With `webhook_targets` (the replicas'
listen addresses) and a ``setWebhook`` of the bot, injected updates are not handed
out by ``getUpdates`` (409 while a webhook is set, as on Telegram) but POSTed to the
targets in turn and retried on the next until one answers 200
(`tests.fakes.telegram_webhook`); `webhook_attempts` lists every POST, `deliver_again`
sends an update once more. `set_language` gives a user's app a
language (``from.language_code`` of everything they send or press); every
``setMyCommands`` is kept per scope and ``language_code`` (`commands`). `fail_next` /
`respond_next` script one error or raw answer for a method (a 429 with ``retry_after``,
a 500, ``{"ok": false}``, a proxy's HTML page through `respond_next_text`...);
`deliveries` counts how often each update was handed out by ``getUpdates``. As on
Telegram, the ``allowed_updates`` of the bot's last ``getUpdates`` or ``setWebhook`` is
kept, and an update injected later of a kind it does not name is never queued (it is
kept in `dropped`); before any, every kind but ``chat_member`` and the reactions is
queued. `block_chat`
makes every send to a chat fail with 403; after `inject_migration` a send to the old
chat fails with ``migrate_to_chat_id`` (PTB's ChatMigrated). Entities sent with a text
are checked against its UTF-16 length (400 "can't parse entities" when out of range)
and kept on the message.

Media: `inject_voice`, `inject_audio`, `inject_video_note`, `inject_photo` (several
sizes, as Telegram sends them) and `inject_document` send what the Bot API sends, each
file's bytes downloadable through ``getFile`` and the file URL (``<base_file_url><token>
/<file_path>``, paths such as ``voice/file_3.oga`` as Telegram names them). A message
can misreport its ``file_size`` (larger than the bytes, or none; ``getFile`` then says
the same); ``getFile`` answers "Bad Request: file is too big" over 20 MB as the Bot API
does; a file id in `broken_files` gets a 404 on download, one in `slow_files` is held
that many seconds or until `release_files()`. `downloads` lists the file ids fetched.

Run standalone with ``python -m tests.fakes.telegram --port N``: it then accepts any
token, and a small HTTP control API lets a test process (or a person with curl) drive
it:

- ``POST /_fake/text`` JSON ``chat_id``, ``user_id``, ``text`` (a command when it
  starts with "/"), optional ``chat_type`` and ``language_code`` (the user's app
  language from now on): queue a message; answers the update.
- ``POST /_fake/message`` JSON ``chat_id``, ``user_id``, optional ``chat_type``,
  ``language_code`` and any Message fields (``sticker``, ``caption``,
  ``message_thread_id``...): queue a message.
- ``POST /_fake/media`` JSON ``chat_id``, ``user_id``, ``kind`` (voice, audio,
  video_note, photo or document), ``content_base64`` and the keyword arguments of that
  ``inject_<kind>`` (``duration``, ``mime``, ``caption``, ``file_name``, ``file_size``...):
  queue a message with a downloadable file; answers the update.
- ``GET /_fake/commands``: every menu set, as ``{"scope", "language_code", "commands"}``.
- ``POST /_fake/fail`` JSON ``method``, optional ``status`` (429), ``retry_after``,
  ``description``: the next call of that method fails (`fail_next`).
- ``GET /_fake/chats/{chat_id}``: the chat's visible messages (user's and bot's).
- ``GET /_fake/drafts/{chat_id}``: the drafts the bot showed there, in order.
- ``GET /_fake/pending``: the updates not yet confirmed by the bot.
- ``POST /_fake/webhook_targets`` JSON ``targets`` (URLs): where updates are POSTed
  once the bot set its webhook (empty: nowhere).
- ``GET /_fake/webhook_attempts``: every POST of an update, as ``{"update_id",
  "target", "status"}`` (status null: no answer).
"""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

from tests.fakes.base import FakeServer, json_response, run_standalone
from tests.fakes.telegram_webhook import Attempt, WebhookDelivery
from tests.timing import scaled

MAX_TEXT_UTF16 = 4096
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024  # what getFile serves to bots (Bot API limit)
PHOTO_SIDES = (90, 320, 800, 1280)  # the longest sides of the sizes Telegram makes
Size = int | Literal["actual"] | None  # a message's file_size: the bytes' length, a lie, none
MAX_POLL_SECONDS = 50.0
ASCII_WHITESPACE = " \t\n\r\f\v"
# the update kinds Telegram sends only when ``allowed_updates`` names them
DEFAULT_UNSENT = frozenset({"chat_member", "message_reaction", "message_reaction_count"})
ERROR_DESCRIPTIONS = {
    400: "Bad Request",
    403: "Forbidden: bot was blocked by the user",
    409: "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running",
    502: "Bad Gateway",
}
# PTB sends str values as they are and JSON-encodes the rest, so a text such as "42" or
# "null" must not be decoded: these parameters are always strings in the Bot API.
STRING_PARAMS = frozenset(
    {"text", "caption", "parse_mode", "action", "callback_query_id", "inline_message_id"}
    | {"file_id", "language_code", "url", "emoji", "business_connection_id"}
)


class BotApiError(Exception):
    """An error answer of the Bot API: HTTP status, description and optional parameters."""

    def __init__(self, status: int, description: str, **parameters: Any) -> None:
        super().__init__(description)
        self.status, self.description, self.parameters = status, description, parameters

    def body(self) -> dict[str, Any]:
        body = {"ok": False, "error_code": self.status, "description": self.description}
        return {**body, "parameters": self.parameters} if self.parameters else body


@dataclass(frozen=True)
class Call:
    """One request the bot made: method name (canonical case), decoded params, HTTP status."""

    method: str
    params: dict[str, Any]
    status: int


@dataclass
class ChatMessage:
    """A message as it currently stands in a chat."""

    chat_id: int
    message_id: int
    text: str | None
    from_bot: bool
    reply_to: int | None = None
    reply_markup: dict[str, Any] | None = None
    thread_id: int | None = None
    edits: int = 0
    entities: list[dict[str, Any]] | None = None
    link_preview_options: dict[str, Any] | None = None  # as the last send or edit gave them


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit Telegram counts in."""
    return len(text.encode("utf-16-le")) // 2


class FakeTelegram(FakeServer):
    """The fake Bot API. ``token=None`` accepts any token (used by the standalone process)."""

    def __init__(
        self,
        token: str | None = "123:ABC",
        bot_username: str = "mnemo_bot",
        webhook_targets: list[str] | None = None,
        webhook_backoff: float = 0.05,
        webhook_timeout: float = 30.0,
    ) -> None:
        """`webhook_targets`: where a set webhook's updates are POSTed (see the module);
        `webhook_backoff`: seconds before a refused POST is retried on the next target;
        `webhook_timeout`: seconds a POST may take before it counts as unanswered."""
        self.token, self.bot_username = token, bot_username
        self._delivery = WebhookDelivery(self._notify, webhook_backoff, webhook_timeout)
        self._delivery.targets = list(webhook_targets or [])
        self.calls: list[Call] = []
        self.my_commands: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.languages: dict[int, str] = {}  # user id -> their app's language_code
        self.callback_answers: dict[str, dict[str, Any]] = {}
        self.files: dict[str, bytes] = {}
        self.file_paths: dict[str, str] = {}  # file id -> file_path (default files/<id>)
        self.reported_sizes: dict[str, int | None] = {}  # file id -> a misreported file_size
        self.broken_files: set[str] = set()  # their download answers 404
        self.slow_files: dict[str, float] = {}  # their download is held this many seconds
        self.downloads: list[str] = []  # file ids requested from the file URL, in order
        self.held_downloads = 0
        self._files_released = asyncio.Event()
        self.held_polls = 0  # getUpdates requests being held right now
        self._callback_ids: set[str] = set()
        self._pending: list[dict[str, Any]] = []
        # what the bot's last getUpdates or setWebhook asked for (None: Telegram's default,
        # every kind but chat_member and the reactions); updates of other kinds are dropped
        # when injected, as Telegram never queues them
        self.allowed_updates: list[str] | None = None
        self.dropped: list[dict[str, Any]] = []  # injected updates of a kind not asked for
        self._sent_fields: dict[tuple[int, int], dict[str, Any]] = {}  # user messages, whole
        self._messages: dict[tuple[int, int], ChatMessage] = {}
        self._chat_types: dict[int, str] = {}
        self._next_message_id: dict[int, itertools.count[int]] = {}
        self._update_ids, self._ids = itertools.count(1), itertools.count(1)
        self._overrides: dict[str, deque[tuple[int, dict[str, Any] | str]]] = defaultdict(deque)
        self.deliveries: dict[int, int] = defaultdict(int)  # update id -> times handed out
        # Waiters register a future before yielding, so no notification can slip between
        # a waiter's check and its wait (a shared Event that waiters clear can lose one).
        self._waiters: set[asyncio.Future[None]] = set()
        self._closing = False
        self.drafts: dict[int, list[tuple[int, str]]] = defaultdict(list)  # (draft id, text)
        self.documents: list[tuple[int, str, bytes]] = []  # (chat id, file name, content)
        self.webhook: dict[str, Any] = {}  # what setWebhook set; empty: none
        self.blocked: set[int] = set()
        self.migrated: dict[int, int] = {}  # old chat id -> new chat id
        # Bot API method names are case-insensitive; `_api_<name>` methods implement them.
        self._methods: dict[str, tuple[str, Callable[[dict[str, Any]], Awaitable[Any]]]] = {
            attr[5:].lower(): (attr[5:], getattr(self, attr))
            for attr in dir(self)
            if attr.startswith("_api_")
        }
        super().__init__()

    def setup_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/bot{token}/{method}", self._handle_api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._handle_file)
        app.router.add_post("/_fake/text", self._handle_control_text)
        app.router.add_get("/_fake/chats/{chat_id}", self._handle_control_chat)
        app.router.add_post("/_fake/message", self._handle_control_message)
        app.router.add_post("/_fake/media", self._handle_control_media)
        app.router.add_post("/_fake/fail", self._handle_control_fail)
        app.router.add_get("/_fake/drafts/{chat_id}", self._handle_control_drafts)
        app.router.add_get("/_fake/pending", self._handle_control_pending)
        app.router.add_get("/_fake/commands", self._handle_control_commands)
        app.router.add_post("/_fake/webhook_targets", self._handle_control_targets)
        app.router.add_get("/_fake/webhook_attempts", self._handle_control_attempts)

    # ----- state a test reads ---------------------------------------------------------

    @property
    def bot_id(self) -> int:
        return int((self.token or "123:").split(":")[0])

    @property
    def webhook_targets(self) -> list[str]:
        """Where updates are POSTed once the bot set its webhook."""
        return self._delivery.targets

    @webhook_targets.setter
    def webhook_targets(self, targets: list[str]) -> None:
        self._delivery.targets = list(targets)
        self._deliver_pending()

    @property
    def webhook_attempts(self) -> list[Attempt]:
        """Every POST of an update to a target, in order."""
        return list(self._delivery.attempts)

    def webhook_answered(self, update_id: int) -> int:
        """How many POSTs of the update were answered 200."""
        return self._delivery.answered(update_id)

    def deliver_again(self, update: dict[str, Any], target: str | None = None) -> None:
        """POST `update` once more, now, to `target` (None: the next in turn), retried
        on the next until a 200."""
        self._delivery.again(update, str(self.webhook.get("secret_token", "")), target)

    @property
    def pending_updates(self) -> list[dict[str, Any]]:
        """Updates not yet confirmed by a later ``offset``."""
        return list(self._pending)

    def chat_messages(self, chat_id: int, include_user: bool = False) -> list[ChatMessage]:
        """The bot's messages still visible in a chat (and the user's if asked), in order."""
        found = [m for (c, _), m in self._messages.items() if c == chat_id]
        return sorted((m for m in found if include_user or m.from_bot), key=lambda m: m.message_id)

    def chat_texts(self, chat_id: int) -> list[str | None]:
        """Current texts of the bot's visible messages in a chat, in order."""
        return [m.text for m in self.chat_messages(chat_id)]

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def commands(self, scope: dict[str, Any] | None = None, language_code: str = "") -> list[dict]:
        """Commands stored by ``setMyCommands`` for a scope (default scope when None)."""
        return self.my_commands.get(self._scope_key(scope, language_code), [])

    async def wait_for(
        self, match: str | Callable[[Call], bool], timeout: float = 5.0, count: int = 1
    ) -> Call:
        """Wait until `count` calls match a method name or predicate; return the `count`-th."""
        pred = (lambda c: c.method == match) if isinstance(match, str) else match
        matches = await self.wait_until(
            lambda: [c for c in self.calls if pred(c)][count - 1 :], timeout
        )
        return matches[0]

    async def wait_until(self, probe: Callable[[], Any], timeout: float = 5.0) -> Any:
        """Wait until `probe()` is truthy, re-checked after each request or injection and
        every 20 ms (for what the fake is not told of: an inbox, a guard's count); return
        its value (TimeoutError after `scaled(timeout)` seconds: a test's wait)."""
        return await self._wait(probe, scaled(timeout), poll=0.02)

    async def _wait(self, probe: Callable[[], Any], timeout: float, poll: float = 0.0) -> Any:
        """`wait_until` for exactly `timeout` seconds (the fake's own holds, as Telegram's);
        re-checked on the fake's events only, or also every `poll` seconds."""
        deadline = time.monotonic() + timeout
        while not (value := probe()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"fake Telegram: condition not met within {timeout} s")
            changed = asyncio.get_running_loop().create_future()
            self._waiters.add(changed)
            try:
                await asyncio.wait([changed], timeout=min(remaining, poll or remaining))
            finally:
                self._waiters.discard(changed)
        return value

    async def stop(self) -> None:
        """Release held long polls and downloads first, so shutdown does not wait for them."""
        self._closing = True
        self._files_released.set()
        self._notify()
        await self._delivery.close()
        await super().stop()

    def release_files(self) -> None:
        """Let every download held by `slow_files` finish now (and later ones at once)."""
        self._files_released.set()

    # ----- scripting --------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        status: int = 429,
        retry_after: int | None = None,
        description: str | None = None,
    ) -> None:
        """Make the next call of `method` fail the way Telegram fails (queued, once each)."""
        if status == 429 and retry_after is None:
            retry_after = 1
        if description is None and status == 429:
            description = f"Too Many Requests: retry after {retry_after}"
        elif description is None:
            description = ERROR_DESCRIPTIONS.get(status, "Internal Server Error")
        params = {"retry_after": retry_after} if retry_after is not None else {}
        self.respond_next(method, BotApiError(status, description, **params).body(), status)

    def respond_next(self, method: str, body: dict[str, Any], status: int = 200) -> None:
        """Answer the next call of `method` with this raw JSON body and status."""
        self._overrides[method.lower()].append((status, body))

    def respond_next_text(self, method: str, text: str, status: int = 200) -> None:
        """Answer the next call of `method` with a non-JSON body (``text/html``), as a proxy
        or a captive portal in front of the Bot API would."""
        self._overrides[method.lower()].append((status, text))

    def set_language(self, user_id: int, language_code: str | None) -> None:
        """The user's app is in `language_code` ("zh-hans"; None: Telegram sends none)."""
        if language_code is None:
            self.languages.pop(user_id, None)
        else:
            self.languages[user_id] = language_code

    def block_chat(self, chat_id: int) -> None:
        """The person blocked the bot: every send or edit there fails with 403."""
        self.blocked.add(chat_id)

    # ----- injecting updates ------------------------------------------------------------

    def inject_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue a raw update (its ``update_id`` is assigned here) and wake long polls."""
        update = {"update_id": next(self._update_ids), **update}
        if not self._allowed(update):
            self.dropped.append(update)
            self._notify()
            return update
        self._pending.append(update)
        self._deliver_pending()
        self._notify()
        return update

    def _allowed(self, update: dict[str, Any]) -> bool:
        kinds = [key for key in update if key != "update_id"]
        wanted = self.allowed_updates
        if not wanted:
            return not set(kinds) & DEFAULT_UNSENT
        return all(kind in wanted for kind in kinds)

    def _ask_for(self, params: dict[str, Any]) -> None:
        """``allowed_updates`` of getUpdates or setWebhook: kept until changed (an empty
        list: the default); only updates created from now on are filtered, as on Telegram."""
        if "allowed_updates" in params:
            wanted = params["allowed_updates"]
            self.allowed_updates = [str(kind) for kind in wanted] if wanted else None

    def _deliver_pending(self) -> None:
        """With a webhook set and targets named, the pending updates go out by POST."""
        if self.webhook and self._delivery.targets:
            secret = str(self.webhook.get("secret_token", ""))
            for update in self._pending:
                self._delivery.deliver(update, secret)
            self._pending = []

    def inject_message(
        self, chat_id: int, user_id: int, chat_type: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Queue a user's message with arbitrary fields (text, sticker, photo, entities...)."""
        message = self._user_message(chat_id, user_id, chat_type, fields)
        return self.inject_update({"message": message})

    def inject_text(
        self, chat_id: int, user_id: int, text: str, chat_type: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        """A text message; groups are told by a negative id (``supergroup``) unless given."""
        return self.inject_message(chat_id, user_id, chat_type, text=text, **fields)

    def inject_command(
        self, chat_id: int, user_id: int, command_line: str, chat_type: str | None = None
    ) -> dict[str, Any]:
        """A ``/command args`` message carrying the ``bot_command`` entity PTB needs."""
        command = command_line.split(maxsplit=1)[0]
        entity = {"type": "bot_command", "offset": 0, "length": utf16_len(command)}
        return self.inject_text(chat_id, user_id, command_line, chat_type, entities=[entity])

    def inject_sticker(self, chat_id: int, user_id: int, emoji: str = "👍") -> dict[str, Any]:
        sticker = {"type": "regular", "width": 512, "height": 512, "is_animated": False}
        sticker |= {"is_video": False, "emoji": emoji, **self._file_ids()}
        return self.inject_message(chat_id, user_id, sticker=sticker)

    def inject_photo(
        self,
        chat_id: int,
        user_id: int,
        content: bytes = b"\x89PNG",
        caption: str | None = None,
        sizes: list[tuple[int, int, bytes]] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """A photo as Telegram sends it: a list of sizes, smallest first, each its own file.

        `sizes` gives them as (width, height, bytes); else they are made from `content`
        (with Pillow: scaled to the longest sides 90, 320, 800, 1280 below its own, then
        the original; content Pillow cannot read: one 90x90 size of those bytes)."""
        made = sizes if sizes is not None else _photo_sizes(content)
        photo = [
            {"width": w, "height": h, **self._add_file(data, "photos", "jpg")}
            for w, h, data in made
        ]
        return self._inject_media(chat_id, user_id, caption, fields, photo=photo)

    def inject_voice(
        self,
        chat_id: int,
        user_id: int,
        content: bytes,
        duration: int = 3,
        mime: str = "audio/ogg",
        caption: str | None = None,
        file_size: Size = "actual",
        **fields: Any,
    ) -> dict[str, Any]:
        """A voice note (``voice``); `file_size` None leaves it out, an int misreports it."""
        voice = self._add_file(content, "voice", "oga", file_size)
        voice |= {"duration": duration, "mime_type": mime}
        return self._inject_media(chat_id, user_id, caption, fields, voice=voice)

    def inject_audio(
        self,
        chat_id: int,
        user_id: int,
        content: bytes,
        duration: int = 30,
        mime: str = "audio/mpeg",
        title: str | None = None,
        performer: str | None = None,
        file_name: str | None = "audio.mp3",
        caption: str | None = None,
        file_size: Size = "actual",
        **fields: Any,
    ) -> dict[str, Any]:
        """An audio file (``audio``, a music file or a forwarded recording)."""
        extension = (file_name or "").rpartition(".")[2] or "mp3"
        audio = self._add_file(content, "music", extension, file_size)
        audio |= {"duration": duration, "mime_type": mime}
        optional = {"title": title, "performer": performer, "file_name": file_name}
        audio |= {k: v for k, v in optional.items() if v is not None}
        return self._inject_media(chat_id, user_id, caption, fields, audio=audio)

    def inject_video_note(
        self,
        chat_id: int,
        user_id: int,
        content: bytes,
        duration: int = 5,
        length: int = 240,
        file_size: Size = "actual",
        **fields: Any,
    ) -> dict[str, Any]:
        """A round video message (``video_note``: no mime type and, as on Telegram, no
        caption)."""
        note = self._add_file(content, "video_notes", "mp4", file_size)
        note |= {"duration": duration, "length": length}
        return self._inject_media(chat_id, user_id, None, fields, video_note=note)

    def inject_document(
        self,
        chat_id: int,
        user_id: int,
        content: bytes,
        mime: str,
        file_name: str,
        caption: str | None = None,
        file_size: Size = "actual",
        **fields: Any,
    ) -> dict[str, Any]:
        """A file sent as a document (an image sent uncompressed arrives this way)."""
        extension = file_name.rpartition(".")[2] if "." in file_name else "bin"
        document = self._add_file(content, "documents", extension, file_size)
        document |= {"file_name": file_name, "mime_type": mime}
        return self._inject_media(chat_id, user_id, caption, fields, document=document)

    def _add_file(
        self, content: bytes, folder: str, extension: str, file_size: Size = "actual"
    ) -> dict[str, Any]:
        """Keep `content` downloadable under a new file id; the message's file fields."""
        ids = self._file_ids()
        file_id = ids["file_id"]
        self.files[file_id] = content
        self.file_paths[file_id] = f"{folder}/{file_id.replace('file', 'file_')}.{extension}"
        if file_size == "actual":
            return ids | {"file_size": len(content)}
        self.reported_sizes[file_id] = file_size
        return ids if file_size is None else ids | {"file_size": file_size}

    def _inject_media(
        self,
        chat_id: int,
        user_id: int,
        caption: str | None,
        fields: dict[str, Any],
        **media: Any,
    ) -> dict[str, Any]:
        extra = {"caption": caption} if caption is not None else {}
        return self.inject_message(chat_id, user_id, **media, **extra, **fields)

    def inject_edited_text(
        self, chat_id: int, user_id: int, message_id: int, text: str
    ) -> dict[str, Any]:
        """The user edited an earlier message of theirs: an ``edited_message`` update."""
        return self.inject_edit(chat_id, user_id, message_id, text=text)

    def inject_edit(
        self, chat_id: int, user_id: int, message_id: int, **fields: Any
    ) -> dict[str, Any]:
        """The user edited an earlier message of theirs (``text=``, ``caption=``,
        ``entities=``...; a field given as None is removed, e.g. a caption): an
        ``edited_message`` update with the whole message as it now stands."""
        stored = self._own_message(chat_id, message_id, from_bot=False)
        sent = self._sent_fields.get((chat_id, message_id), {})
        message = {**self._as_dict(stored), **sent, "from": self._user(user_id)}
        message = {k: v for k, v in (message | fields).items() if v is not None}
        self._sent_fields[(chat_id, message_id)] = message
        stored.text, stored.edits = message.get("text"), stored.edits + 1
        return self.inject_update({"edited_message": message | {"edit_date": _now()}})

    def inject_callback_query(
        self, chat_id: int, user_id: int, data: str, message_id: int
    ) -> dict[str, Any]:
        """The user pressed an inline button with `data` under one of the bot's messages."""
        stored = self._own_message(chat_id, message_id, from_bot=True)
        query = {"id": str(next(self._ids)), "from": self._user(user_id), "data": data}
        query |= {"chat_instance": str(chat_id), "message": self._as_dict(stored)}
        self._callback_ids.add(query["id"])
        return self.inject_update({"callback_query": query})

    def inject_migration(self, old_chat_id: int, new_chat_id: int) -> dict[str, Any]:
        """A group became a supergroup: the service message in the old chat; sends to the
        old id fail from now on with ``migrate_to_chat_id``."""
        self.migrated[old_chat_id] = new_chat_id
        self._chat_types[old_chat_id], self._chat_types[new_chat_id] = "group", "supergroup"
        message = {"message_id": self._allocate_id(old_chat_id), "date": _now()}
        message |= {"chat": self._chat(old_chat_id), "from": self._user(1)}
        return self.inject_update({"message": message | {"migrate_to_chat_id": new_chat_id}})

    # ----- HTTP -------------------------------------------------------------------------

    async def _handle_api(self, request: web.Request) -> web.Response:
        if self.token is not None and request.match_info["token"] != self.token:
            return json_response(BotApiError(401, "Unauthorized").body(), 401)
        params = await _read_params(request)
        name, handler = self._methods.get(request.match_info["method"].lower(), (None, None))
        key = (name or request.match_info["method"]).lower()
        if self._overrides[key]:
            status, body = self._overrides[key].popleft()
        elif name is None or handler is None:
            status, body = 404, BotApiError(404, "Not Found").body()
        else:
            try:
                status, body = 200, {"ok": True, "result": await handler(params)}
            except BotApiError as error:
                status, body = error.status, error.body()
        self.calls.append(Call(name or request.match_info["method"], params, status))
        self._notify()
        if isinstance(body, str):
            return web.Response(text=body, status=status, content_type="text/html")
        return json_response(body, status)

    async def _handle_file(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        by_path = {p: f for f, p in self.file_paths.items()}
        file_id = by_path.get(path, path.removeprefix("files/"))
        self.downloads.append(file_id)
        self._notify()
        if file_id in self.slow_files:
            self.held_downloads += 1
            self._notify()
            try:
                await asyncio.wait_for(self._files_released.wait(), self.slow_files[file_id])
            except TimeoutError:
                pass
            finally:
                self.held_downloads -= 1
        if (
            file_id not in self.files
            or file_id in self.broken_files
            or (self.token is not None and request.match_info["token"] != self.token)
        ):
            return web.Response(status=404, text="Not Found")
        return web.Response(body=self.files[file_id], content_type="application/octet-stream")

    async def _handle_control_text(self, request: web.Request) -> web.Response:
        try:
            data = await request.json()
            args = (int(data["chat_id"]), int(data["user_id"]), str(data["text"]))
        except (ValueError, KeyError, TypeError) as error:
            return web.Response(status=400, text=f"expected JSON chat_id, user_id, text: {error}")
        if data.get("language_code") is not None:
            self.set_language(args[1], str(data["language_code"]))
        inject = self.inject_command if args[2].startswith("/") else self.inject_text
        return json_response(inject(*args))

    async def _handle_control_chat(self, request: web.Request) -> web.Response:
        messages = self.chat_messages(int(request.match_info["chat_id"]), include_user=True)
        return json_response([self._as_dict(m) for m in messages])

    async def _handle_control_message(self, request: web.Request) -> web.Response:
        try:
            data = dict(await request.json())
            chat_id, user_id = int(data.pop("chat_id")), int(data.pop("user_id"))
        except (ValueError, KeyError, TypeError) as error:
            return web.Response(status=400, text=f"expected JSON chat_id, user_id: {error}")
        chat_type = data.pop("chat_type", None)
        language = data.pop("language_code", None)
        if language is not None:
            self.set_language(user_id, str(language))
        return json_response(self.inject_message(chat_id, user_id, chat_type, **data))

    async def _handle_control_media(self, request: web.Request) -> web.Response:
        kinds = {"voice", "audio", "video_note", "photo", "document"}
        try:
            data = dict(await request.json())
            chat_id, user_id = int(data.pop("chat_id")), int(data.pop("user_id"))
            kind = str(data.pop("kind"))
            content = base64.b64decode(str(data.pop("content_base64")), validate=True)
            if kind not in kinds:
                raise ValueError(f"kind must be one of {sorted(kinds)}")
            update = getattr(self, f"inject_{kind}")(chat_id, user_id, content, **data)
        except (ValueError, KeyError, TypeError) as error:
            expected = "chat_id, user_id, kind, content_base64[, inject_<kind> arguments]"
            return web.Response(status=400, text=f"expected JSON {expected}: {error}")
        return json_response(update)

    async def _handle_control_fail(self, request: web.Request) -> web.Response:
        try:
            data = await request.json()
            method, status = str(data["method"]), int(data.get("status", 429))
        except (ValueError, KeyError, TypeError) as error:
            return web.Response(status=400, text=f"expected JSON method[, status]: {error}")
        self.fail_next(method, status, data.get("retry_after"), data.get("description"))
        return json_response({"ok": True})

    async def _handle_control_drafts(self, request: web.Request) -> web.Response:
        drafts = self.drafts.get(int(request.match_info["chat_id"]), [])
        return json_response([{"draft_id": d, "text": t} for d, t in drafts])

    async def _handle_control_pending(self, request: web.Request) -> web.Response:
        return json_response(self.pending_updates)

    async def _handle_control_targets(self, request: web.Request) -> web.Response:
        try:
            targets = (await request.json())["targets"]
            if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
                raise TypeError("targets must be a list of URLs")
        except (ValueError, KeyError, TypeError) as error:
            return web.Response(status=400, text=f"expected JSON targets: {error}")
        self.webhook_targets = targets
        return json_response({"ok": True})

    async def _handle_control_attempts(self, request: web.Request) -> web.Response:
        attempts = self._delivery.attempts
        return json_response([vars(a) for a in attempts])

    async def _handle_control_commands(self, request: web.Request) -> web.Response:
        menus = [
            {"scope": json.loads(scope), "language_code": language, "commands": commands}
            for (scope, language), commands in self.my_commands.items()
        ]
        return json_response(menus)

    # ----- Bot API methods --------------------------------------------------------------

    async def _api_getMe(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._bot_user() | {"can_join_groups": True, "supports_inline_queries": False}

    async def _api_deleteWebhook(self, params: dict[str, Any]) -> bool:
        self.webhook = {}
        return True

    async def _api_setWebhook(self, params: dict[str, Any]) -> bool:
        if not str(params.get("url") or "").startswith(("https://", "http://")):
            raise BotApiError(400, "Bad Request: bad webhook: an HTTPS URL must be provided")
        self.webhook = dict(params)
        self._ask_for(params)
        self._deliver_pending()
        return True

    async def _api_getWebhookInfo(self, params: dict[str, Any]) -> dict[str, Any]:
        info = {"url": str(self.webhook.get("url", "")), "has_custom_certificate": False}
        return info | {"pending_update_count": 0 if self.webhook else len(self._pending)}

    async def _api_sendMessageDraft(self, params: dict[str, Any]) -> bool:
        chat_id, text = self._chat_id(params), self._text(params)
        if self._chat(chat_id)["type"] != "private":
            raise BotApiError(400, "Bad Request: message drafts can be sent only to private chats")
        draft_id = params.get("draft_id")
        if not isinstance(draft_id, int) or draft_id == 0:
            raise BotApiError(400, "Bad Request: invalid draft_id")
        self._entities(text, params)
        self.drafts[chat_id].append((draft_id, text))
        return True

    async def _api_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook:
            raise BotApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        self._ask_for(params)
        offset, limit = int(params.get("offset") or 0), int(params.get("limit") or 100)
        if offset > 0:  # confirms every update below it, as Telegram does
            self._pending = [u for u in self._pending if u["update_id"] >= offset]
            self._notify()
        timeout = min(float(params.get("timeout") or 0), MAX_POLL_SECONDS)
        self.held_polls += 1
        self._notify()
        try:
            await self._wait(lambda: self._pending or self._closing, timeout)
        except TimeoutError:
            return []
        finally:
            self.held_polls -= 1
        batch = self._pending[: max(1, min(limit, 100))]
        for update in batch:
            self.deliveries[update["update_id"]] += 1
        return batch

    async def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id, text = self._chat_id(params), self._text(params)
        reply = params.get("reply_parameters") or {}
        reply_to = reply.get("message_id") or params.get("reply_to_message_id")
        if reply_to and (chat_id, int(reply_to)) not in self._messages:
            if not reply.get("allow_sending_without_reply"):
                raise BotApiError(400, "Bad Request: message to be replied not found")
            reply_to = None
        entities = self._entities(text, params)
        message = ChatMessage(chat_id, self._allocate_id(chat_id), text, True)
        message.entities = entities
        message.link_preview_options = params.get("link_preview_options")
        message.reply_to = int(reply_to) if reply_to else None
        message.reply_markup = params.get("reply_markup")
        message.thread_id = params.get("message_thread_id")
        self._messages[(chat_id, message.message_id)] = message
        return self._as_dict(message)

    async def _api_sendDocument(self, params: dict[str, Any]) -> dict[str, Any]:
        """A file sent as a document: kept in `documents` as (chat, file name, bytes)."""
        chat_id = self._chat_id(params)
        document = params.get("document")
        if not hasattr(document, "file"):
            raise BotApiError(400, "Bad Request: there is no document in the request")
        self.documents.append((chat_id, document.filename, document.file.read()))
        message = ChatMessage(chat_id, self._allocate_id(chat_id), None, True)
        message.thread_id = params.get("message_thread_id")
        self._messages[(chat_id, message.message_id)] = message
        return self._as_dict(message) | {
            "document": {"file_id": f"d{message.message_id}", "file_unique_id": "d"}
        }

    async def _api_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id, text = self._chat_id(params), self._text(params)
        message = self._get(chat_id, params.get("message_id"), "message to edit not found")
        if not message.from_bot:
            raise BotApiError(400, "Bad Request: message can't be edited")
        markup = params.get("reply_markup")
        if message.text == text and message.reply_markup == markup:
            raise BotApiError(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup "
                "of the message",
            )
        message.entities = self._entities(text, params)
        message.link_preview_options = params.get("link_preview_options")
        message.text, message.reply_markup, message.edits = text, markup, message.edits + 1
        return self._as_dict(message) | {"edit_date": _now()}

    async def _api_sendChatAction(self, params: dict[str, Any]) -> bool:
        self._sendable(self._chat_id(params))
        return True

    async def _api_deleteMessage(self, params: dict[str, Any]) -> bool:
        message = self._get(
            self._chat_id(params), params.get("message_id"), "message to delete not found"
        )
        del self._messages[(message.chat_id, message.message_id)]
        return True

    async def _api_setMyCommands(self, params: dict[str, Any]) -> bool:
        key = self._scope_key(params.get("scope"), params.get("language_code") or "")
        self.my_commands[key] = list(params.get("commands") or [])
        return True

    async def _api_getMyCommands(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self.commands(params.get("scope"), params.get("language_code") or "")

    async def _api_deleteMyCommands(self, params: dict[str, Any]) -> bool:
        key = self._scope_key(params.get("scope"), params.get("language_code") or "")
        self.my_commands.pop(key, None)
        return True

    async def _api_answerCallbackQuery(self, params: dict[str, Any]) -> bool:
        query_id = str(params.get("callback_query_id", ""))
        if query_id not in self._callback_ids or query_id in self.callback_answers:
            raise BotApiError(
                400,
                "Bad Request: query is too old and response timeout expired or query ID is invalid",
            )
        self.callback_answers[query_id] = params
        return True

    async def _api_getFile(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params.get("file_id", ""))
        if file_id not in self.files:
            raise BotApiError(400, "Bad Request: invalid file_id")
        size = self.reported_sizes.get(file_id, len(self.files[file_id]))
        if max(size or 0, len(self.files[file_id])) > MAX_DOWNLOAD_BYTES:
            raise BotApiError(400, "Bad Request: file is too big")
        info: dict[str, Any] = {"file_id": file_id, "file_unique_id": f"u{file_id}"}
        info["file_path"] = self.file_paths.get(file_id, f"files/{file_id}")
        return info if size is None else info | {"file_size": size}

    # ----- internals --------------------------------------------------------------------

    def _notify(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _chat_id(self, params: dict[str, Any]) -> int:
        value = params.get("chat_id")
        if value is None or value == "":
            raise BotApiError(400, "Bad Request: chat_id is empty")
        if isinstance(value, bool) or not isinstance(value, int):
            raise BotApiError(400, "Bad Request: chat not found")
        return self._sendable(value)

    def _sendable(self, chat_id: int) -> int:
        """`chat_id`, unless the bot was blocked there or the group moved elsewhere."""
        if chat_id in self.blocked:
            raise BotApiError(403, ERROR_DESCRIPTIONS[403])
        if chat_id in self.migrated:
            raise BotApiError(
                400,
                "Bad Request: group chat was upgraded to a supergroup chat",
                migrate_to_chat_id=self.migrated[chat_id],
            )
        return chat_id

    @staticmethod
    def _entities(text: str, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The entities sent with `text`, checked like Telegram checks them."""
        entities = params.get("entities")
        if entities is None:
            return None
        size = utf16_len(text)
        for entity in entities:
            offset, length = entity.get("offset"), entity.get("length")
            if not isinstance(offset, int) or not isinstance(length, int) or "type" not in entity:
                raise BotApiError(400, "Bad Request: can't parse entities: bad entity")
            if offset < 0 or length <= 0 or offset + length > size:
                raise BotApiError(
                    400,
                    f"Bad Request: can't parse entities: entity beyond the end of text at {offset}",
                )
        return list(entities)

    def _text(self, params: dict[str, Any]) -> str:
        text = params.get("text")
        text = "" if text is None else str(text).strip(ASCII_WHITESPACE)
        if not text:
            raise BotApiError(400, "Bad Request: message text is empty")
        if utf16_len(text) > MAX_TEXT_UTF16:
            raise BotApiError(400, "Bad Request: message is too long")
        return text

    def _get(self, chat_id: int, message_id: Any, missing: str) -> ChatMessage:
        message = self._messages.get((chat_id, message_id)) if isinstance(message_id, int) else None
        if message is None:
            raise BotApiError(400, f"Bad Request: {missing}")
        return message

    def _own_message(self, chat_id: int, message_id: int, from_bot: bool) -> ChatMessage:
        """For injections: a visible message of the bot (or of a user), else ValueError."""
        message = self._messages.get((chat_id, message_id))
        if message is None or message.from_bot != from_bot:
            who = "bot" if from_bot else "user"
            raise ValueError(f"no {who} message {message_id} in chat {chat_id}")
        return message

    def _allocate_id(self, chat_id: int) -> int:
        return next(self._next_message_id.setdefault(chat_id, itertools.count(1)))

    def _chat(self, chat_id: int) -> dict[str, Any]:
        kind = self._chat_types.get(chat_id, "private" if chat_id > 0 else "supergroup")
        return {"id": chat_id, "type": kind} | ({"title": "Group"} if chat_id < 0 else {})

    def _user(self, user_id: int) -> dict[str, Any]:
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"}
        if user_id in self.languages:
            user["language_code"] = self.languages[user_id]
        return user

    def _bot_user(self) -> dict[str, Any]:
        name = {"first_name": "Mnemo", "username": self.bot_username}
        return {"id": self.bot_id, "is_bot": True} | name

    def _file_ids(self) -> dict[str, str]:
        n = next(self._ids)
        return {"file_id": f"file{n}", "file_unique_id": f"ufile{n}"}

    def _user_message(
        self, chat_id: int, user_id: int, chat_type: str | None, fields: dict[str, Any]
    ) -> dict[str, Any]:
        if chat_type is not None:
            self._chat_types[chat_id] = chat_type
        stored = ChatMessage(chat_id, self._allocate_id(chat_id), fields.get("text"), False)
        self._messages[(chat_id, stored.message_id)] = stored
        message = self._as_dict(stored) | {"from": self._user(user_id)} | fields
        self._sent_fields[(chat_id, stored.message_id)] = message
        return message

    def _as_dict(self, message: ChatMessage) -> dict[str, Any]:
        data: dict[str, Any] = {"message_id": message.message_id, "date": _now()}
        data |= {"chat": self._chat(message.chat_id)}
        if message.from_bot:
            data["from"] = self._bot_user()
        if message.text is not None:
            data["text"] = message.text
        if message.entities:
            data["entities"] = message.entities
        if message.thread_id is not None:
            data["message_thread_id"] = message.thread_id
        if message.reply_markup and "inline_keyboard" in message.reply_markup:
            data["reply_markup"] = message.reply_markup
        return data

    @staticmethod
    def _scope_key(scope: Any, language_code: str) -> tuple[str, str]:
        scope = scope or {"type": "default"}
        return json.dumps(scope, sort_keys=True), language_code


async def _read_params(request: web.Request) -> dict[str, Any]:
    """Query, JSON body or form fields; each form value JSON-decoded, else kept as a string."""
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        return params | await request.json()
    for key, value in (await request.post()).items():
        params[key] = value
    return {k: _decode(v) if k not in STRING_PARAMS else v for k, v in params.items()}


def _decode(value: Any) -> Any:
    """A JSON-encoded form value, or the raw string when it is not JSON (e.g. "@channel")."""
    if not isinstance(value, str):
        return value  # an uploaded file
    try:
        return json.loads(value)
    except ValueError:
        return value


def _now() -> int:
    return int(time.time())


def _photo_sizes(content: bytes) -> list[tuple[int, int, bytes]]:
    """Telegram's sizes of a picture: JPEG copies scaled to each of `PHOTO_SIDES` below
    its own longest side, then the picture itself; without Pillow, or for bytes it cannot
    read, one 90x90 size of the bytes as they are."""
    try:
        from PIL import Image

        with Image.open(io.BytesIO(content)) as image:
            image.load()
            original = image.convert("RGB")
    except Exception:  # no Pillow, or not a picture: Pillow raises many kinds
        return [(90, 90, content)]
    sizes = []
    for side in PHOTO_SIDES:
        if side < max(original.size):
            scaled = original.copy()
            scaled.thumbnail((side, side))
            out = io.BytesIO()
            scaled.save(out, format="JPEG", quality=80)
            sizes.append((scaled.width, scaled.height, out.getvalue()))
    return [*sizes, (original.width, original.height, content)]


if __name__ == "__main__":
    run_standalone(lambda args: FakeTelegram(token=None), "Fake Telegram Bot API server")

"""A fake Discord (REST under ``/api/v10`` and the gateway websocket) for the real discord.py.

Point discord.py at it with
``use_discord_endpoints(dc.api_base, dc.gateway_url)`` (gateway/adapters/discord_endpoints.py).
REST answers carry a Content-Type of exactly ``application/json`` and Discord's error
bodies (``{"message", "code", "errors"}``), so discord.py raises its real exceptions
(``LoginFailure``, ``NotFound``, ``Forbidden``, ``HTTPException``). The gateway sends plain
JSON TEXT frames (discord.py only decompresses binary ones): HELLO, heartbeat ACKs,
READY then one GUILD_CREATE per guild, RESUMED, GUILD_MEMBERS_CHUNK.

The fake keeps what a user would see in each channel (edits replace the content, deletes
remove the message). Guild messages that do not mention the bot arrive with empty content
unless the client identified with the message_content intent, as on Discord.
Edits and deletions: `inject_edit` dispatches MESSAGE_UPDATE (the whole message, a new
text with ``edited_timestamp``, or the same text as when an embed loads), `inject_delete`
MESSAGE_DELETE (one message) or MESSAGE_DELETE_BULK (several).
Slash commands and buttons: command syncs (``PUT /applications/…/commands``, globally or per
guild) are checked (names, descriptions and their per-locale ``description_localizations``)
and kept whole (`app_commands`, `commands_synced`); `inject_command` and `inject_button_click`
dispatch INTERACTION_CREATE (with the user's Discord `locale`), and the answers (callback,
``@original``, follow-ups) are kept per interaction (`FakeInteraction`), refused after
Discord's 3-second window or twice.
Attachments: `inject_message` takes ``files={name: bytes | (bytes, content_type) |
FakeFile}`` (attachments with ``content_type``, ``size`` and, for pictures, ``width`` /
``height``) and ``voice=bytes`` (a voice message: flag IS_VOICE_MESSAGE, one
``voice-message.ogg`` with ``duration_secs`` and ``waveform``). Every attachment's bytes
are served at its ``url`` (``/attachments/<channel>/<id>/<name>?ex=…&is=…&hm=…``, like
Discord's CDN) and its ``proxy_url``, with its content type; one whose id or file name
is in `broken_files` answers 404, one in `slow_files` is held that many seconds or until
`release_files()`; `downloads` lists the attachment ids fetched.
Run standalone with ``python -m tests.fakes.discord --port N``; it then accepts any token.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import mimetypes
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from aiohttp import BodyPartReader, WSMsgType, web

from tests.fakes.base import FakeServer, json_response, run_standalone
from tests.timing import scaled

POLL_SECONDS = 0.02  # wait_until re-checks this often, besides after each request

DEFAULT_TOKEN = "fake-discord-token"
BOT_ID = 1100000000000000001
OWNER_ID = 1100000000000000002
MAX_CONTENT = 2000
MESSAGE_CONTENT_INTENT = 1 << 15
API_PREFIX = "/api/v10"
_DISCORD_EPOCH_MS = 1420070400000
# @everyone: view channel, send messages, embed links, attach files, read history
_EVERYONE_PERMISSIONS = str((1 << 10) | (1 << 11) | (1 << 14) | (1 << 15) | (1 << 16))


Match = Mapping[str, str]  # the path's {cid} / {mid} parts


@dataclass(frozen=True)
class FakeGuild:
    """A guild the bot is in, with one text channel."""

    id: int
    channel_id: int
    name: str = "Test guild"
    channel_name: str = "general"


DEFAULT_GUILDS = (FakeGuild(id=1200000000000000001, channel_id=1200000000000000002),)


@dataclass
class Call:
    """One REST request: method, path below ``/api/v10``, JSON payload, uploads, status."""

    method: str
    path: str
    body: Any = None
    files: dict[str, bytes] = field(default_factory=dict)
    status: int = 0

    @property
    def route(self) -> str:
        return f"{self.method} {self.path}"


class DiscordApiError(Exception):
    """An error answer of Discord's REST API: HTTP status, JSON code, message, field errors."""

    def __init__(self, status: int, code: int, message: str, errors: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.errors = status, code, message, errors

    @classmethod
    def form(cls, field_name: str, code: str, message: str) -> DiscordApiError:
        """The 400 "Invalid Form Body" (code 50035) for one bad field."""
        errors = {field_name: {"_errors": [{"code": code, "message": message}]}}
        return cls(400, 50035, "Invalid Form Body", errors)

    def response(self) -> web.Response:
        body: dict[str, Any] = {"message": self.message, "code": self.code}
        if self.errors is not None:
            body["errors"] = self.errors
        return json_response(body, self.status)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _user(user_id: int, name: str | None = None, bot: bool = False) -> dict[str, Any]:
    name = name or f"user{user_id}"
    return {
        "id": str(user_id), "username": name, "discriminator": "0", "global_name": name,
        "avatar": None, "bot": bot, "public_flags": 0,
    }  # fmt: skip


def _member(user: dict[str, Any] | None = None) -> dict[str, Any]:
    member = {"roles": [], "joined_at": _now(), "deaf": False, "mute": False, "flags": 0}
    return {**member, "user": user} if user is not None else member


ApiHandler = Callable[[Call, Match], Awaitable[web.Response]]
EPHEMERAL, LOADING = 1 << 6, 1 << 7  # message flags
IS_VOICE_MESSAGE = 1 << 13  # message flag of a voice message
VOICE_FILENAME = "voice-message.ogg"  # the name Discord gives a voice message's file
INTERACTION_WINDOW = 3.0  # seconds Discord waits for the first answer to an interaction
_COMMAND_NAME = re.compile(r"^[-_a-z0-9]{1,32}$")
LOCALES = frozenset({
    "id", "da", "de", "en-GB", "en-US", "es-ES", "es-419", "fr", "hr", "it", "lt", "hu", "nl",
    "no", "pl", "pt-BR", "ro", "fi", "sv-SE", "vi", "tr", "cs", "el", "bg", "ru", "uk", "hi",
    "th", "zh-CN", "ja", "zh-TW", "ko",
})  # fmt: skip
"""The locales Discord takes in ``*_localizations``."""


@dataclass(frozen=True)
class FakeFile:
    """An attachment a user sends: its bytes and what Discord says of them.

    `content_type` None: guessed from the file name ("" leaves it out); `size` None: the
    bytes' length (another number misreports it); `width`/`height` None: read from an
    image with Pillow; `duration_secs` and `waveform` make it a voice message's file."""

    data: bytes
    content_type: str | None = None
    size: int | None = None
    width: int | None = None
    height: int | None = None
    duration_secs: float | None = None
    waveform: bytes | None = None


AttachmentSpec = bytes | tuple[bytes, str] | FakeFile


@dataclass
class FakeInteraction:
    """One interaction a test injected, and what its person saw of the answers.

    `responses` are the callback types received (5: deferred, 6: deferred update, 4: a
    message); `original` is the response message (None until one exists; for a button
    deferred with type 6 it is the message with the buttons); `followups` as sent, then
    edited. Ephemeral messages (flag 64) are only here, not in the channel.
    """

    id: int
    token: str
    type: int  # 2: application command, 3: message component
    user_id: int
    channel_id: int
    guild_id: int | None
    created: float
    responses: list[int] = field(default_factory=list)
    answered_after: float | None = None  # seconds from dispatch to the first callback
    original: dict[str, Any] | None = None
    followups: list[dict[str, Any]] = field(default_factory=list)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The response (unless deferred and never edited) and the follow-ups, in order."""
        first = [] if self.original is None else [self.original]
        return [m for m in first + self.followups if not m.get("deleted")]

    @property
    def texts(self) -> list[str]:
        return [m["content"] for m in self.messages]


class FakeDiscord(FakeServer):
    """Fake Discord REST + gateway. ``token=None`` accepts any token (standalone process)."""

    def __init__(
        self, token: str | None = DEFAULT_TOKEN, guilds: tuple[FakeGuild, ...] = DEFAULT_GUILDS
    ) -> None:
        self.token, self.guilds = token, guilds
        self.bot_user = _user(BOT_ID, "mnemo", bot=True)
        self.calls: list[Call] = []
        self.gateway_received: list[dict[str, Any]] = []  # every op the client sent
        self.identify: dict[str, Any] | None = None
        # False: an IDENTIFY asking for the message-content intent is refused with close
        # code 4014 (the intent is not enabled in the developer portal)
        self.message_content_granted = True
        self.app_commands: dict[str, list[dict[str, Any]]] = {}  # "global" or guild id
        self.interactions: dict[str, FakeInteraction] = {}  # by token
        self._channels: dict[int, dict[str, Any]] = {}
        self._messages: dict[int, dict[int, dict[str, Any]]] = {}
        self._dm_by_user: dict[int, int] = {}
        self._faults: list[tuple[str, Callable[[], web.Response]]] = []
        self._sockets: set[web.WebSocketResponse] = set()
        self._live: web.WebSocketResponse | None = None
        self._session_id, self._seq, self._last_id = "", 0, 0
        self._changed = asyncio.Event()
        self._attachments: dict[int, tuple[str, FakeFile]] = {}  # id -> (file name, file)
        self.broken_files: set[str] = set()  # attachment ids or file names: download 404s
        self.slow_files: dict[str, float] = {}  # attachment id or file name -> seconds held
        self.downloads: list[str] = []  # attachment ids requested at their url, in order
        self.held_downloads = 0
        self._files_released = asyncio.Event()
        for guild in guilds:
            self._channels[guild.channel_id] = self._text_channel(guild)
        super().__init__()

    def setup_routes(self, app: web.Application) -> None:
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{cid}/{aid}/{name}", self._download)
        app.router.add_get("/proxy/attachments/{cid}/{aid}/{name}", self._download)
        api = {
            ("GET", "/users/@me"): self._get_me,
            ("GET", "/oauth2/applications/@me"): self._get_application,
            ("GET", "/gateway"): self._get_gateway,
            ("GET", "/gateway/bot"): self._get_gateway,
            ("POST", "/users/@me/channels"): self._create_dm,
            ("POST", "/channels/{cid}/typing"): self._typing,
            ("POST", "/channels/{cid}/messages"): self._send,
            ("PATCH", "/channels/{cid}/messages/{mid}"): self._edit,
            ("DELETE", "/channels/{cid}/messages/{mid}"): self._delete,
            ("PUT", "/applications/{app}/commands"): self._sync_commands,
            ("PUT", "/applications/{app}/guilds/{gid}/commands"): self._sync_commands,
            ("POST", "/interactions/{iid}/{token}/callback"): self._callback,
            ("POST", "/webhooks/{app}/{token}"): self._followup,
            ("GET", "/webhooks/{app}/{token}/messages/{mid}"): self._webhook_message,
            ("PATCH", "/webhooks/{app}/{token}/messages/{mid}"): self._webhook_message,
            ("DELETE", "/webhooks/{app}/{token}/messages/{mid}"): self._webhook_message,
        }
        for (method, path), handler in api.items():
            app.router.add_route(method, API_PREFIX + path, self._api(handler))
        # anything else under the API (unknown path or method): Discord's JSON 404
        app.router.add_route("*", API_PREFIX + "/{tail:.*}", self._api(self._unknown))

    # ----- what a test reads ------------------------------------------------------------

    @property
    def api_base(self) -> str:
        return self.url + API_PREFIX

    @property
    def gateway_url(self) -> str:
        return self.url.replace("http://", "ws://", 1) + "/gateway"

    @property
    def bot_id(self) -> int:
        return BOT_ID

    def channel_messages(self, channel_id: int) -> list[dict[str, Any]]:
        """Messages still visible in a channel, oldest first, as they stand after edits."""
        return list(self._messages.get(channel_id, {}).values())

    def channel_texts(self, channel_id: int) -> list[str]:
        return [m["content"] for m in self.channel_messages(channel_id)]

    def dm_channel_id(self, user_id: int) -> int:
        """The DM channel between the bot and a user (created on first use)."""
        if user_id not in self._dm_by_user:
            cid = self._snowflake()
            self._dm_by_user[user_id] = cid
            self._channels[cid] = {"id": str(cid), "type": 1, "last_message_id": None,
                                   "recipients": [_user(user_id)], "flags": 0}  # fmt: skip
        return self._dm_by_user[user_id]

    async def wait_for(
        self, match: str | Callable[[Call], bool], timeout: float = 5.0, count: int = 1
    ) -> Call:
        """Wait until `count` calls match (a substring of "METHOD /path" or a predicate)."""
        pred = (lambda c: match in c.route) if isinstance(match, str) else match
        matches = await self.wait_until(
            lambda: [c for c in self.calls if pred(c)][count - 1 :], timeout
        )
        return matches[-1]

    async def wait_until(self, probe: Callable[[], Any], timeout: float = 5.0) -> Any:
        """Wait until `probe()` is truthy (re-checked on every request, and every 20 ms for
        what the fake is not told of); return its value (TimeoutError after
        `scaled(timeout)` seconds)."""
        limit = scaled(timeout)
        deadline = time.monotonic() + limit
        while not (value := probe()):
            self._changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"fake Discord: condition not met within {limit:g} s")
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, POLL_SECONDS))
            except TimeoutError:
                continue
        return value

    async def wait_ready(self, timeout: float = 5.0) -> None:
        """Wait until a gateway connection has identified (or resumed) and is open."""
        await self.wait_until(lambda: self._live is not None and not self._live.closed, timeout)

    # ----- scripting --------------------------------------------------------------------

    def fail_next(self, route: str, status: int, code: int = 0, message: str = "") -> None:
        """Answer the next request whose "METHOD /path" contains `route` with an error."""
        error = DiscordApiError(status, code, message or f"{status}: fake failure")
        self._faults.append((route, error.response))

    def rate_limit_next(self, route: str, retry_after: float = 0.05) -> None:
        """Answer the next matching request with a 429 that discord.py retries after a wait."""
        body = {"message": "You are being rate limited.", "retry_after": retry_after}
        body["global"] = False
        # discord.py retries a 429 only with a Via header (otherwise: a Cloudflare ban)
        headers = {"Via": "1.1 google", "Retry-After": str(max(1, round(retry_after)))}
        self._faults.append((route, lambda: json_response(body, 429, **headers)))

    async def inject_message(
        self,
        content: str,
        author_id: int,
        channel_id: int | None = None,
        guild: bool = True,
        mentions_bot: bool = False,
        username: str | None = None,
        reply_to: int | None = None,
        attachments: tuple[str, ...] = (),
        bot: bool = False,
        omit: tuple[str, ...] = (),
        forward_of: str | None = None,
        forward_from_channel: int | None = None,
        files: Mapping[str, AttachmentSpec] | None = None,
        voice: bytes | None = None,
        voice_seconds: float = 2.5,
        dispatch: bool = True,
    ) -> dict[str, Any]:
        """Dispatch MESSAGE_CREATE from a user, in a guild text channel or thread, or in
        their DM.

        With `mentions_bot`, the bot's mention is put in front of the content (unless the
        content already holds it) and in ``mentions``, as Discord does. `reply_to` makes it
        a reply to that message of the channel (``referenced_message``, no ping);
        `attachments` are file names attached (the bytes b"fake file", no content type);
        `files` attaches real files (see the module doc); `voice` makes it a voice message
        of `voice_seconds`; `bot` marks the author as a bot; `omit` names
        fields left out of the event (a malformed one, e.g. without ``type``); `forward_of`
        makes it a forward of a message with that text (empty content, a reference of type 1
        and the text in ``message_snapshots``; `forward_from_channel` is where the forwarded
        message was, in the reference: the same channel by default); `dispatch` False keeps
        the message without telling the bot (one sent while it was away: not in
        discord.py's cache). Returns the stored message (with the full content, whatever
        the client's intents).
        """
        ws = self._require_live() if dispatch else None
        author = _user(author_id, username, bot=bot)
        if guild:
            channel_id = channel_id or self.guilds[0].channel_id
            if self._channels.get(channel_id, {}).get("type") not in (0, 11, 12):
                raise ValueError(f"no guild text channel {channel_id} in the fake")
        else:
            channel_id = channel_id or self.dm_channel_id(author_id)
            if self._channels.get(channel_id, {}).get("type") != 1:
                raise ValueError(f"no DM channel {channel_id}; use dm_channel_id()")
        mention = f"<@{BOT_ID}>"
        if mentions_bot and mention not in content:
            content = f"{mention} {content}"
        mentions = [self.bot_user] if mentions_bot else []
        attached = {name: FakeFile(b"fake file", content_type="") for name in attachments}
        attached |= {name: _fake_file(name, spec) for name, spec in (files or {}).items()}
        if voice is not None:
            waveform = bytes((i * 37) % 256 for i in range(min(256, max(1, len(voice)))))
            attached[VOICE_FILENAME] = FakeFile(
                voice, "audio/ogg", duration_secs=voice_seconds, waveform=waveform
            )
        message = self._new_message(channel_id, author, content, mentions, files=attached)
        if voice is not None:
            message["flags"] |= IS_VOICE_MESSAGE
        if reply_to is not None:
            referenced = self._messages.get(channel_id, {}).get(reply_to)
            reference = {"message_id": str(reply_to), "channel_id": str(channel_id)}
            if "guild_id" in message:
                reference["guild_id"] = message["guild_id"]
            message.update(type=19, referenced_message=referenced, message_reference=reference)
        if forward_of is not None:
            snapshot = {"type": 0, "content": forward_of, "embeds": [], "attachments": []}
            snapshot.update(timestamp=_now(), edited_timestamp=None)
            source = self._channels.get(forward_from_channel or channel_id, {})
            reference = {"type": 1, "message_id": "1"}
            reference["channel_id"] = str(forward_from_channel or channel_id)
            if "guild_id" in source:
                reference["guild_id"] = source["guild_id"]
            message.update(message_reference=reference, message_snapshots=[{"message": snapshot}])
        if guild:
            message["member"] = _member()
            message["mentions"] = [{**m, "member": _member()} for m in mentions]
        if ws is not None:
            await self._dispatch(ws, "MESSAGE_CREATE", self._as_seen(message, omit))
        self._changed.set()
        return message

    async def inject_edit(
        self, channel_id: int, message_id: int, content: str | None = None
    ) -> dict[str, Any]:
        """Dispatch MESSAGE_UPDATE for a message of the channel, whole, as Discord does.
        With `content` the author edited its text (``edited_timestamp`` set); None keeps
        the text, as when an embed loads or the message is pinned. Returns the message."""
        ws = self._require_live()
        message = self._messages.get(channel_id, {}).get(message_id)
        if message is None:
            raise ValueError(f"no message {message_id} in channel {channel_id}")
        if content is not None:
            message.update(content=content, edited_timestamp=_now())
        else:
            message["pinned"] = not message["pinned"]
        await self._dispatch(ws, "MESSAGE_UPDATE", self._as_seen(message))
        self._changed.set()
        return message

    async def inject_delete(self, channel_id: int, *message_ids: int) -> None:
        """Delete messages of the channel: MESSAGE_DELETE for one, MESSAGE_DELETE_BULK for
        several (as a moderator's purge); neither says who wrote them."""
        ws = self._require_live()
        for message_id in message_ids:
            self._messages.get(channel_id, {}).pop(message_id, None)
        event: dict[str, Any] = {"channel_id": str(channel_id)}
        if "guild_id" in self._channels.get(channel_id, {}):
            event["guild_id"] = self._channels[channel_id]["guild_id"]
        if len(message_ids) == 1:
            await self._dispatch(ws, "MESSAGE_DELETE", event | {"id": str(message_ids[0])})
        else:
            ids = [str(message_id) for message_id in message_ids]
            await self._dispatch(ws, "MESSAGE_DELETE_BULK", event | {"ids": ids})
        self._changed.set()

    def _as_seen(self, message: dict[str, Any], omit: tuple[str, ...] = ()) -> dict[str, Any]:
        """A message as the gateway sends it to the bot: without the fields in `omit`, and
        a server message that does not mention the bot without its text unless the bot
        has the message content intent."""
        event = {k: v for k, v in message.items() if k not in omit}
        intents = (self.identify or {}).get("intents", 0)
        mentioned = any(m.get("id") == str(BOT_ID) for m in message.get("mentions", []))
        if "guild_id" in message and not mentioned and not intents & MESSAGE_CONTENT_INTENT:
            event["content"] = ""
        return event

    async def create_thread(
        self,
        name: str = "thread",
        parent_id: int | None = None,
        owner_id: int = OWNER_ID,
        private: bool = False,
    ) -> int:
        """Open a public thread (or, with `private`, a private one: channel type 12) under a
        guild text channel (THREAD_CREATE); its id."""
        ws = self._require_live()
        parent = self._channels[parent_id or self.guilds[0].channel_id]
        tid = self._snowflake()
        metadata = {"archived": False, "auto_archive_duration": 1440,
                    "archive_timestamp": _now(), "locked": False}  # fmt: skip
        if private:
            metadata["invitable"] = True
        thread = {
            "id": str(tid), "type": 12 if private else 11, "guild_id": parent["guild_id"],
            "name": name,
            "parent_id": parent["id"], "owner_id": str(owner_id), "last_message_id": None,
            "rate_limit_per_user": 0, "message_count": 0, "member_count": 1, "flags": 0,
            "thread_metadata": metadata,
        }  # fmt: skip
        self._channels[tid] = thread
        await self._dispatch(ws, "THREAD_CREATE", {**thread, "newly_created": True})
        self._changed.set()
        return tid

    async def send_reconnect(self) -> None:
        """Send op 7 RECONNECT: the client reconnects and resumes the session."""
        ws = self._require_live()
        self._live = None
        await ws.send_json({"op": 7, "d": None})

    def release_files(self) -> None:
        """Let every download held by `slow_files` finish now (and later ones at once)."""
        self._files_released.set()

    async def stop(self) -> None:
        self._files_released.set()
        for ws in list(self._sockets):
            await ws.close(code=1001, message=b"fake stopping")
        await super().stop()

    # ----- REST -------------------------------------------------------------------------

    def _api(self, handler: ApiHandler) -> Callable[[web.Request], Awaitable[web.Response]]:
        """Wrap a REST handler: record the call, check the token, apply scripted faults."""

        async def serve(request: web.Request) -> web.Response:
            call = Call(request.method, request.path.removeprefix(API_PREFIX))
            self.calls.append(call)
            try:
                call.body, call.files = await _read_payload(request)
                self._check_auth(request)
                response = self._take_fault(call) or await handler(call, request.match_info)
            except DiscordApiError as exc:
                response = exc.response()
            call.status = response.status
            self._changed.set()
            return response

        return serve

    def _check_auth(self, request: web.Request) -> None:
        if request.path == API_PREFIX + "/gateway" or self.token is None:
            return
        if request.path.startswith((API_PREFIX + "/interactions/", API_PREFIX + "/webhooks/")):
            return  # the interaction's token in the path is the credential
        if request.headers.get("Authorization") != f"Bot {self.token}":
            raise DiscordApiError(401, 0, "401: Unauthorized")

    def _take_fault(self, call: Call) -> web.Response | None:
        for index, (route, respond) in enumerate(self._faults):
            if route in call.route:
                del self._faults[index]
                return respond()
        return None

    async def _unknown(self, call: Call, match: Match) -> web.Response:
        raise DiscordApiError(404, 0, "404: Not Found")

    async def _get_me(self, call: Call, match: Match) -> web.Response:
        return json_response({**self.bot_user, "verified": True, "mfa_enabled": False, "flags": 0})

    async def _get_application(self, call: Call, match: Match) -> web.Response:
        app = {
            "id": str(BOT_ID), "name": "mnemo", "description": "", "icon": None,
            "bot_public": True, "bot_require_code_grant": False, "verify_key": "0" * 64,
            "owner": _user(OWNER_ID, "owner"), "flags": 0, "team": None, "rpc_origins": [],
            "bot": self.bot_user,
        }  # fmt: skip
        return json_response(app)

    async def _get_gateway(self, call: Call, match: Match) -> web.Response:
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        return json_response({"url": self.gateway_url, "shards": 1, "session_start_limit": limit})

    async def _create_dm(self, call: Call, match: Match) -> web.Response:
        recipient = str((call.body or {}).get("recipient_id", ""))
        if not recipient.isdigit():
            raise DiscordApiError.form("recipient_id", "NUMBER_TYPE_COERCE", "Not a snowflake.")
        return json_response(self._channels[self.dm_channel_id(int(recipient))])

    async def _typing(self, call: Call, match: Match) -> web.Response:
        self._channel(match)
        return web.Response(status=204)

    async def _send(self, call: Call, match: Match) -> web.Response:
        channel = self._channel(match)
        payload, cid = call.body or {}, int(channel["id"])
        embeds = payload.get("embeds") or []
        content = _checked_content(payload.get("content"), bool(embeds or call.files))
        reference = payload.get("message_reference")
        referenced = self._referenced(cid, reference) if reference is not None else None
        message = self._new_message(cid, self.bot_user, content, [], files=call.files)
        message["embeds"] = embeds
        message["flags"] = int(payload.get("flags") or 0)  # SUPPRESS_EMBEDS is 1 << 2
        message["components"] = payload.get("components") or []  # buttons
        if reference is not None:
            ids = {k: str(v) for k, v in reference.items() if k.endswith("_id") and v is not None}
            message.update(type=19, referenced_message=referenced, message_reference=ids)
        return json_response(message)

    def _referenced(self, channel_id: int, reference: Any) -> dict[str, Any] | None:
        """The message a reply points to; unknown ones are refused unless told not to fail."""
        if not isinstance(reference, dict):
            raise DiscordApiError.form("message_reference", "MODEL_TYPE_CONVERT", "Not an object.")
        found = self._messages.get(channel_id, {}).get(_int(reference.get("message_id")))
        if found is None and reference.get("fail_if_not_exists", True):
            unknown = "REPLIES_UNKNOWN_MESSAGE"
            raise DiscordApiError.form("message_reference", unknown, "Unknown message")
        return found

    async def _edit(self, call: Call, match: Match) -> web.Response:
        message = self._bot_message(match, "Cannot edit a message authored by another user")
        payload = call.body or {}
        embeds = payload.get("embeds", message["embeds"]) or []
        has_other_parts = bool(embeds or message["attachments"])
        content = _checked_content(payload.get("content", message["content"]), has_other_parts)
        message.update(content=content, embeds=embeds, edited_timestamp=_now())
        if "flags" in payload:  # Discord keeps a message's flags unless an edit sets them
            message["flags"] = int(payload["flags"] or 0)
        return json_response(message)

    async def _delete(self, call: Call, match: Match) -> web.Response:
        message = self._bot_message(match, "Missing Permissions", code=50013)
        del self._messages[int(message["channel_id"])][int(message["id"])]
        return web.Response(status=204)

    def _channel(self, match: Match) -> dict[str, Any]:
        channel = self._channels.get(_int(match["cid"]))
        if channel is None:
            raise DiscordApiError(404, 10003, "Unknown Channel")
        return channel

    def _bot_message(self, match: Match, refusal: str, code: int = 50005) -> dict:
        """The bot's own message named in the path; other authors' messages are refused."""
        cid = int(self._channel(match)["id"])
        message = self._messages.get(cid, {}).get(_int(match["mid"]))
        if message is None:
            raise DiscordApiError(404, 10008, "Unknown Message")
        if message["author"]["id"] != str(BOT_ID):
            raise DiscordApiError(403, code, refusal)
        return message

    # ----- interactions (slash commands and buttons) ------------------------------------

    def commands_synced(self, guild_id: int | None = None) -> list[str]:
        """The names of the commands last synced globally, or to one guild."""
        return [c["name"] for c in self.app_commands.get(str(guild_id or "global"), [])]

    async def inject_command(
        self,
        name: str,
        user_id: int,
        options: Mapping[str, str] | None = None,
        guild: bool = True,
        channel_id: int | None = None,
        locale: str = "en-US",
    ) -> FakeInteraction:
        """Dispatch INTERACTION_CREATE for ``/name`` with string `options`, as a user runs it
        in a guild channel or thread (the guild's command when one is synced there, else the
        global one) or in their DM, their Discord set to `locale`. Only a synced command can
        be run, as on Discord."""
        channel = self._interaction_channel(user_id, guild, channel_id)
        guild_id = _int(channel.get("guild_id")) or None
        scope = str(guild_id) if name in self.commands_synced(guild_id) and guild_id else "global"
        command = next((c for c in self.app_commands.get(scope, []) if c["name"] == name), None)
        if command is None:
            raise ValueError(f"no command /{name} synced for this channel")
        data: dict[str, Any] = {"id": command["id"], "name": name, "type": 1}
        data["options"] = [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()]
        if scope != "global":
            data["guild_id"] = scope
        return await self._interact(2, data, user_id, channel, locale=locale)

    async def inject_button_click(
        self, message: Mapping[str, Any], custom_id: str, user_id: int, locale: str = "en-US"
    ) -> FakeInteraction:
        """Dispatch INTERACTION_CREATE for a click on `message`'s button `custom_id` by a user
        (the message as `FakeInteraction.messages` or `channel_messages` hold it)."""
        buttons = [b for row in message.get("components") or [] for b in row.get("components", [])]
        if custom_id not in [b.get("custom_id") for b in buttons]:
            raise ValueError(f"no button {custom_id!r} on that message")
        channel = self._channels[int(message["channel_id"])]
        data = {"custom_id": custom_id, "component_type": 2}
        return await self._interact(3, data, user_id, channel, message=dict(message), locale=locale)

    def _interaction_channel(
        self, user_id: int, guild: bool, channel_id: int | None
    ) -> dict[str, Any]:
        if not guild:
            return self._channels[channel_id or self.dm_channel_id(user_id)]
        channel = self._channels.get(channel_id or self.guilds[0].channel_id)
        if channel is None or channel.get("type") not in (0, 11, 12):
            raise ValueError(f"no guild text channel {channel_id} in the fake")
        return channel

    async def _interact(
        self,
        kind: int,
        data: dict[str, Any],
        user_id: int,
        channel: dict[str, Any],
        message: dict[str, Any] | None = None,
        locale: str = "en-US",
    ) -> FakeInteraction:
        ws = self._require_live()
        iid, token = self._snowflake(), f"itoken-{uuid.uuid4().hex}"
        guild_id = _int(channel.get("guild_id")) or None
        payload: dict[str, Any] = {
            "id": str(iid), "type": kind, "token": token, "version": 1, "data": data,
            "application_id": str(BOT_ID), "channel_id": channel["id"], "channel": channel,
            "locale": locale, "app_permissions": _EVERYONE_PERMISSIONS, "entitlements": [],
            "attachment_size_limit": 10 << 20, "context": 0 if guild_id else 1,
        }  # fmt: skip
        if guild_id:
            payload["guild_id"] = str(guild_id)
            payload["member"] = {**_member(_user(user_id)), "permissions": _EVERYONE_PERMISSIONS}
        else:
            payload["user"] = _user(user_id)
        if message is not None:
            payload["message"] = message
        record = FakeInteraction(iid, token, kind, user_id, _int(channel["id"]), guild_id,
                                 time.monotonic(), original=message)  # fmt: skip
        self.interactions[token] = record
        await self._dispatch(ws, "INTERACTION_CREATE", payload)
        self._changed.set()
        return record

    async def _sync_commands(self, call: Call, match: Match) -> web.Response:
        if _int(match["app"]) != BOT_ID:
            raise DiscordApiError(403, 50001, "Missing Access")
        if "gid" in match and _int(match["gid"]) not in {g.id for g in self.guilds}:
            raise DiscordApiError(403, 50001, "Missing Access")
        commands = call.body if isinstance(call.body, list) else []
        for index, command in enumerate(commands):
            if not _COMMAND_NAME.match(str(command.get("name", ""))):
                raise DiscordApiError.form(f"{index}.name", "APPLICATION_COMMAND_INVALID_NAME",
                                           "Command name is invalid")  # fmt: skip
            if not 1 <= len(str(command.get("description", ""))) <= 100:
                limit = "Must be between 1 and 100 in length."
                raise DiscordApiError.form(f"{index}.description", "BASE_TYPE_BAD_LENGTH", limit)
            _check_localizations(f"{index}", command)
            for number, option in enumerate(command.get("options") or []):
                _check_localizations(f"{index}.options.{number}", option)
        stored = [
            {**c, "id": str(self._snowflake()), "application_id": str(BOT_ID), "version": "1",
             "type": c.get("type", 1), "options": c.get("options") or []}
            for c in commands
        ]  # fmt: skip
        self.app_commands[match.get("gid", "global")] = stored
        return json_response(stored)

    def _interaction(self, token: str, interaction_id: int | None = None) -> FakeInteraction:
        record = self.interactions.get(token)
        if record is None or (interaction_id is not None and record.id != interaction_id):
            raise DiscordApiError(404, 10062, "Unknown interaction")
        return record

    async def _callback(self, call: Call, match: Match) -> web.Response:
        """Answer an interaction: 4 message, 5 deferred ("thinking"), 6 deferred update."""
        record = self._interaction(match["token"], _int(match["iid"]))
        if record.responses:
            raise DiscordApiError(400, 40060, "Interaction has already been acknowledged.")
        waited = time.monotonic() - record.created
        if waited > INTERACTION_WINDOW:
            raise DiscordApiError(404, 10062, "Unknown interaction")
        body = call.body or {}
        kind, data = body.get("type"), body.get("data") or {}
        if kind not in (4, 5, 6) or (kind == 6 and record.type != 3):
            raise DiscordApiError.form("type", "BASE_TYPE_CHOICES", "Value must be one of 4, 5, 6.")
        record.responses.append(kind)
        record.answered_after = waited
        if kind in (4, 5):
            flags = int(data.get("flags") or 0) | (LOADING if kind == 5 else 0)
            content = "" if kind == 5 else _checked_content(data.get("content"), False)
            record.original = self._webhook_new(record, content, flags, data)
        original = record.original or {}
        answer = {
            "interaction": {
                "id": str(record.id), "type": record.type,
                "response_message_id": original.get("id"),
                "response_message_loading": bool(original.get("flags", 0) & LOADING),
                "response_message_ephemeral": bool(original.get("flags", 0) & EPHEMERAL),
            },
            "resource": {"type": kind, **({"message": original} if kind in (4, 5) else {})},
        }  # fmt: skip
        return json_response(answer)

    def _webhook_record(self, match: Match) -> FakeInteraction:
        record = self.interactions.get(match["token"])
        if _int(match["app"]) != BOT_ID or record is None or not record.responses:
            raise DiscordApiError(404, 10015, "Unknown Webhook")
        return record

    async def _followup(self, call: Call, match: Match) -> web.Response:
        record, body = self._webhook_record(match), call.body or {}
        components = body.get("components") or []
        content = _checked_content(body.get("content"), bool(components or call.files))
        message = self._webhook_new(record, content, int(body.get("flags") or 0), body)
        message["files"] = dict(call.files)  # what was uploaded with it, by file name
        record.followups.append(message)
        return json_response({k: v for k, v in message.items() if k != "files"})  # bytes: not JSON

    async def _webhook_message(self, call: Call, match: Match) -> web.Response:
        """GET, PATCH or DELETE ``@original`` or a follow-up of an interaction."""
        record = self._webhook_record(match)
        if match["mid"] == "@original":
            message = record.original
        else:
            message = next((m for m in record.followups if m["id"] == match["mid"]), None)
        if message is None or message.get("deleted"):
            raise DiscordApiError(404, 10008, "Unknown Message")
        if call.method == "DELETE":
            message["deleted"] = True
            self._messages.get(_int(message["channel_id"]), {}).pop(_int(message["id"]), None)
            return web.Response(status=204)
        if call.method == "PATCH":
            body = call.body or {}
            components = body.get("components", message.get("components")) or []
            content = _checked_content(body.get("content", message["content"]), bool(components))
            message.update(content=content, components=components, edited_timestamp=_now())
            message["flags"] = message.get("flags", 0) & ~LOADING
        return json_response(message)

    def _webhook_new(
        self, record: FakeInteraction, content: str, flags: int, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A message of the interaction's webhook; an ephemeral one stays out of the channel."""
        message = self._new_message(record.channel_id, self.bot_user, content, [])
        message.update(flags=flags, components=body.get("components") or [],
                       webhook_id=str(BOT_ID), application_id=str(BOT_ID))  # fmt: skip
        if flags & EPHEMERAL:
            self._messages[record.channel_id].pop(_int(message["id"]))
        return message

    # ----- gateway ----------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.add(ws)
        try:
            await ws.send_json({"op": 10, "d": {"heartbeat_interval": 41250}, "s": None, "t": None})
            async for msg in ws:
                if msg.type is WSMsgType.TEXT:
                    await self._on_op(ws, json.loads(msg.data))
        finally:
            self._sockets.discard(ws)
            if self._live is ws:
                self._live = None
            self._changed.set()
        return ws

    async def _on_op(self, ws: web.WebSocketResponse, payload: dict[str, Any]) -> None:
        self.gateway_received.append(payload)
        op, data = payload.get("op"), payload.get("d") or {}
        if op == 1:
            await ws.send_json({"op": 11, "d": None, "s": None, "t": None})
        elif op == 2:
            await self._on_identify(ws, data)
        elif op == 6:
            if data.get("session_id") != self._session_id or self.identify is None:
                await ws.send_json({"op": 9, "d": False, "s": None, "t": None})
                return
            self._live = ws
            await self._dispatch(ws, "RESUMED", {})
        elif op == 8:
            chunk = {
                "guild_id": str(data.get("guild_id")), "members": [_member(self.bot_user)],
                "chunk_index": 0, "chunk_count": 1, "not_found": [], "nonce": data.get("nonce"),
            }  # fmt: skip
            await self._dispatch(ws, "GUILD_MEMBERS_CHUNK", chunk)
        self._changed.set()

    async def _on_identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        if self.token is not None and data.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return
        if not self.message_content_granted and data.get("intents", 0) & MESSAGE_CONTENT_INTENT:
            await ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        self.identify, self._session_id, self._seq = data, uuid.uuid4().hex, 0
        ready = {
            "v": 10, "user": self.bot_user, "session_id": self._session_id,
            "resume_gateway_url": self.gateway_url, "shard": data.get("shard", [0, 1]),
            "guilds": [{"id": str(g.id), "unavailable": True} for g in self.guilds],
            "application": {"id": str(BOT_ID), "flags": 0}, "private_channels": [],
        }  # fmt: skip
        await self._dispatch(ws, "READY", ready)
        for guild in self.guilds:
            await self._dispatch(ws, "GUILD_CREATE", self._guild_payload(guild))
        self._live = ws

    async def _dispatch(self, ws: web.WebSocketResponse, event: str, data: dict) -> None:
        self._seq += 1
        await ws.send_json({"op": 0, "t": event, "s": self._seq, "d": data})

    def _require_live(self) -> web.WebSocketResponse:
        if self._live is None or self._live.closed:
            raise RuntimeError("no identified gateway connection; await wait_ready() first")
        return self._live

    # ----- payloads ---------------------------------------------------------------------

    def _snowflake(self) -> int:
        stamp = (int(time.time() * 1000) - _DISCORD_EPOCH_MS) << 22
        self._last_id = max(self._last_id + 1, stamp)
        return self._last_id

    def _new_message(
        self,
        channel_id: int,
        author: dict[str, Any],
        content: str,
        mentions: list[dict[str, Any]],
        files: Mapping[str, bytes | FakeFile] | None = None,
    ) -> dict[str, Any]:
        """Build and store a message object with the fields discord.py reads."""
        mid, channel = self._snowflake(), self._channels[channel_id]
        attachments = [
            self._attachment(channel_id, name, data if isinstance(data, FakeFile) else
                             _fake_file(name, data))
            for name, data in (files or {}).items()
        ]  # fmt: skip
        message = {
            "id": str(mid), "channel_id": str(channel_id), "author": author, "content": content,
            "timestamp": _now(), "edited_timestamp": None, "tts": False, "pinned": False,
            "mention_everyone": False, "mentions": mentions, "mention_roles": [],
            "attachments": attachments, "embeds": [], "type": 0, "flags": 0, "components": [],
        }  # fmt: skip
        if "guild_id" in channel:
            message["guild_id"] = channel["guild_id"]
        self._messages.setdefault(channel_id, {})[mid] = message
        channel["last_message_id"] = str(mid)
        return message

    def _attachment(self, channel_id: int, name: str, file: FakeFile) -> dict[str, Any]:
        """An attachment object as Discord sends it; its bytes are served at its url."""
        aid = self._snowflake()
        self._attachments[aid] = (name, file)
        stamp = f"{int(time.time()):x}"
        link = f"{self.url}/attachments/{channel_id}/{aid}/{name}?ex={stamp}&is={stamp}&hm=fa4e"
        attachment: dict[str, Any] = {"id": str(aid), "filename": name, "url": link}
        attachment |= {"proxy_url": link.replace("/attachments/", "/proxy/attachments/", 1)}
        attachment["size"] = len(file.data) if file.size is None else file.size
        if file.content_type:
            attachment["content_type"] = file.content_type
        width, height = file.width, file.height
        if width is None and (file.content_type or "").startswith("image/"):
            width, height = _image_size(file.data)
        if width is not None:
            attachment |= {"width": width, "height": height}
        if file.duration_secs is not None:
            attachment["duration_secs"] = file.duration_secs
        if file.waveform is not None:
            attachment["waveform"] = base64.b64encode(file.waveform).decode()
        return attachment

    async def _download(self, request: web.Request) -> web.Response:
        """An attachment's bytes, as Discord's CDN serves them (no token needed)."""
        aid = _int(request.match_info["aid"])
        name, file = self._attachments.get(aid, ("", None))
        keys = {str(aid), name}
        self.downloads.append(str(aid))
        self._changed.set()
        if seconds := next((self.slow_files[k] for k in keys if k in self.slow_files), None):
            self.held_downloads += 1
            self._changed.set()
            try:
                await asyncio.wait_for(self._files_released.wait(), seconds)
            except TimeoutError:
                pass
            finally:
                self.held_downloads -= 1
        if file is None or name != request.match_info["name"] or keys & self.broken_files:
            return web.Response(status=404, text="404: Not Found")
        content_type = file.content_type or "application/octet-stream"
        return web.Response(body=file.data, headers={"Content-Type": content_type})

    @staticmethod
    def _text_channel(guild: FakeGuild) -> dict[str, Any]:
        return {
            "id": str(guild.channel_id), "type": 0, "name": guild.channel_name, "position": 0,
            "guild_id": str(guild.id), "permission_overwrites": [], "nsfw": False,
            "topic": None, "last_message_id": None, "rate_limit_per_user": 0, "parent_id": None,
        }  # fmt: skip

    def _guild_payload(self, guild: FakeGuild) -> dict[str, Any]:
        """A full GUILD_CREATE: an @everyone role, the text channel, the bot as member."""
        everyone = {
            "id": str(guild.id), "name": "@everyone", "permissions": _EVERYONE_PERMISSIONS,
            "position": 0, "color": 0, "hoist": False, "managed": False, "mentionable": False,
            "flags": 0,
        }  # fmt: skip
        empty = ["threads", "stage_instances", "guild_scheduled_events", "voice_states",
                 "presences", "emojis", "stickers", "features", "soundboard_sounds"]  # fmt: skip
        return {
            "id": str(guild.id), "name": guild.name, "icon": None, "owner_id": str(OWNER_ID),
            "roles": [everyone], "channels": [self._channels[guild.channel_id]],
            "members": [_member(self.bot_user)], "member_count": 1, "large": False,
            "unavailable": False, "joined_at": _now(), **{key: [] for key in empty},
        }  # fmt: skip


def _fake_file(name: str, spec: AttachmentSpec) -> FakeFile:
    """A `FakeFile` from bytes (content type guessed from the name) or (bytes, type)."""
    if isinstance(spec, FakeFile):
        file = spec
    elif isinstance(spec, tuple):
        file = FakeFile(spec[0], content_type=spec[1])
    else:
        file = FakeFile(spec)
    if file.content_type is None:
        guessed = mimetypes.guess_type(name)[0] or ""
        file = replace(file, content_type=guessed)
    return file


def _image_size(data: bytes) -> tuple[int | None, int | None]:
    """A picture's width and height read with Pillow (None, None if it cannot)."""
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            return image.size
    except Exception:  # no Pillow, or not a picture: Pillow raises many kinds
        return None, None


def _check_localizations(where: str, described: Mapping[str, Any]) -> None:
    """Discord's checks of ``description_localizations``: known locales, 1 to 100 characters."""
    for locale, text in (described.get("description_localizations") or {}).items():
        if locale not in LOCALES:
            raise DiscordApiError.form(f"{where}.description_localizations", "INVALID_LOCALE",
                                       f"{locale!r} is not a valid locale")  # fmt: skip
        if not 1 <= len(str(text)) <= 100:
            limit = "Must be between 1 and 100 in length."
            field_name = f"{where}.description_localizations.{locale}"
            raise DiscordApiError.form(field_name, "BASE_TYPE_BAD_LENGTH", limit)


def _checked_content(content: Any, has_other_parts: bool) -> str:
    """The message text (None: none), or Discord's answer for a bad, too long or empty one."""
    content = "" if content is None else content
    if not isinstance(content, str):
        raise DiscordApiError.form("content", "STRING_TYPE_CONVERT", "Not a string.")
    if len(content) > MAX_CONTENT:
        limit = f"Must be {MAX_CONTENT} or fewer in length."
        raise DiscordApiError.form("content", "BASE_TYPE_MAX_LENGTH", limit)
    if not content and not has_other_parts:
        raise DiscordApiError(400, 50006, "Cannot send an empty message")
    return content


def _int(value: Any) -> int:
    """A snowflake from a path or payload; anything else maps to 0, which matches nothing."""
    text = str(value) if value is not None else ""
    return int(text) if text.isdigit() else 0


async def _read_payload(request: web.Request) -> tuple[Any, dict[str, bytes]]:
    """The JSON payload of a request (``payload_json`` for multipart) and any uploads."""
    payload, files = None, {}
    try:
        if request.content_type.startswith("multipart/"):
            async for part in await request.multipart():
                if not isinstance(part, BodyPartReader):
                    continue
                data = await part.read()
                if part.name == "payload_json":
                    payload = json.loads(data)
                elif part.filename:
                    files[part.filename] = bytes(data)
        elif raw := await request.read():
            payload = json.loads(raw)
    except ValueError as exc:
        raise DiscordApiError(400, 50109, "The request body contains invalid JSON.") from exc
    if payload is not None and not isinstance(payload, dict | list):  # list: command sync
        raise DiscordApiError(400, 50035, "Invalid Form Body")
    return payload, files


if __name__ == "__main__":
    run_standalone(lambda args: FakeDiscord(token=None), "Fake Discord REST + gateway")

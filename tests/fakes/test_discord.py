"""The fake Discord, proven against the real discord.py 2.7 client over loopback."""

from __future__ import annotations

import asyncio
import io
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import discord
import discord.gateway
import discord.http
import pytest

from gateway.adapters.discord_endpoints import (
    current_discord_endpoints,
    discord_endpoints,
    restore_discord_endpoints,
    use_discord_endpoints,
)
from gateway.errors import ConfigError
from tests.fakes.base import wait_until
from tests.fakes.discord import DEFAULT_GUILDS, DEFAULT_TOKEN, FakeDiscord, FakeFile
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
USER_ID = 4200000000000000001


class ReplyingClient(discord.Client):
    """Answers DMs and guild messages that mention it: typing, a reply, then an edit."""

    def __init__(self, message_content: bool = True) -> None:
        intents = discord.Intents.default()
        intents.message_content = message_content
        super().__init__(intents=intents, guild_ready_timeout=0.05, chunk_guilds_at_startup=False)
        self.ready = asyncio.Event()
        self.resumed = asyncio.Event()
        self.seen: list[discord.Message] = []
        self.errors: list[BaseException] = []

    async def on_ready(self) -> None:
        self.ready.set()

    async def on_resumed(self) -> None:
        self.resumed.set()

    async def on_error(self, event_method: str, *args: object, **kwargs: object) -> None:
        self.errors.append(sys.exc_info()[1] or RuntimeError(event_method))

    async def on_message(self, message: discord.Message) -> None:
        assert self.user is not None
        if message.author.id == self.user.id:
            return
        self.seen.append(message)
        if message.guild is not None and not self.user.mentioned_in(message):
            return
        async with message.channel.typing():
            if message.guild is None:
                sent = await message.channel.send("thinking…")
            else:
                sent = await message.reply("thinking…", mention_author=False)
        await sent.edit(content=f"you said: {message.content}")


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        with discord_endpoints(fake.api_base, fake.gateway_url):
            yield fake


@asynccontextmanager
async def running(
    client: ReplyingClient, token: str = DEFAULT_TOKEN
) -> AsyncIterator[ReplyingClient]:
    """Start the client as a task, wait for on_ready (or its failure), close it afterwards."""
    task = asyncio.create_task(client.start(token))
    ready = asyncio.create_task(client.ready.wait())
    try:
        done, _ = await asyncio.wait(
            {task, ready}, timeout=scaled(5), return_when=asyncio.FIRST_COMPLETED
        )
        if task in done:
            task.result()  # raises the login or connection error
        assert ready in done, "on_ready did not fire within 5 s"
        yield client
        assert client.errors == []
    finally:
        ready.cancel()
        await client.close()
        await asyncio.wait_for(task, scaled(5))


async def test_login_and_ready_build_the_guild_cache(dc: FakeDiscord) -> None:
    async with running(ReplyingClient()) as client:
        await dc.wait_ready()
        assert client.user is not None and client.user.id == dc.bot_id
        channel = client.get_channel(dc.guilds[0].channel_id)
        assert isinstance(channel, discord.TextChannel)
        assert channel.guild.name == dc.guilds[0].name
        assert client.application_id == dc.bot_id
    routes = [c.route for c in dc.calls]
    assert routes[:2] == ["GET /users/@me", "GET /oauth2/applications/@me"]
    assert dc.identify is not None and dc.identify["intents"] & (1 << 15)


async def test_dm_gets_typing_then_a_reply_that_is_edited(dc: FakeDiscord) -> None:
    async with running(ReplyingClient()):
        await dc.wait_ready()
        await dc.inject_message("hello there", USER_ID, guild=False)
        dm = dc.dm_channel_id(USER_ID)
        await dc.wait_for(f"PATCH /channels/{dm}/messages/")
        assert dc.channel_texts(dm) == ["hello there", "you said: hello there"]
        bot_message = dc.channel_messages(dm)[1]
        assert bot_message["author"]["id"] == str(dc.bot_id)
        assert bot_message["edited_timestamp"] is not None
        routes = [c.route.split("/messages/")[0] for c in dc.calls[2:]]
        assert routes == [
            f"POST /channels/{dm}/typing",
            f"POST /channels/{dm}/messages",
            f"PATCH /channels/{dm}",
        ]


async def test_guild_mention_gets_a_reply_referencing_the_message(dc: FakeDiscord) -> None:
    cid = dc.guilds[0].channel_id
    async with running(ReplyingClient()) as client:
        await dc.wait_ready()
        await dc.inject_message("just chatting", USER_ID)  # no mention: ignored
        asked = await dc.inject_message("what time is it?", USER_ID, mentions_bot=True)
        send = await dc.wait_for(f"POST /channels/{cid}/messages")
        await dc.wait_for("PATCH ")
        assert send.body["message_reference"]["message_id"] == int(asked["id"])
        assert [m.content for m in client.seen] == ["just chatting", asked["content"]]
        assert client.seen[1].guild is not None and client.seen[1].guild.id == dc.guilds[0].id
    reply = dc.channel_messages(cid)[-1]
    assert reply["type"] == 19 and reply["referenced_message"]["id"] == asked["id"]
    assert reply["message_reference"]["message_id"] == asked["id"]
    assert reply["content"] == f"you said: <@{dc.bot_id}> what time is it?"
    assert len(dc.channel_messages(cid)) == 3


async def test_without_message_content_intent_guild_text_arrives_empty(dc: FakeDiscord) -> None:
    async with running(ReplyingClient(message_content=False)) as client:
        await dc.wait_ready()
        await dc.inject_message("secret words", USER_ID)
        await dc.inject_message("hi bot", USER_ID, mentions_bot=True)
        await dc.wait_for("PATCH ")
        assert [m.content for m in client.seen] == ["", f"<@{dc.bot_id}> hi bot"]
    assert dc.channel_texts(dc.guilds[0].channel_id)[0] == "secret words"


async def test_rate_limited_send_is_retried(dc: FakeDiscord) -> None:
    cid = dc.guilds[0].channel_id
    dc.rate_limit_next(f"POST /channels/{cid}/messages", retry_after=0.05)
    async with running(ReplyingClient()) as client:
        channel = client.get_channel(cid)
        assert isinstance(channel, discord.TextChannel)
        sent = await channel.send("after the wait")
    sends = [c for c in dc.calls if c.route == f"POST /channels/{cid}/messages"]
    assert [c.status for c in sends] == [429, 200]
    assert dc.channel_texts(cid) == ["after the wait"]
    assert sent.id == int(dc.channel_messages(cid)[0]["id"])


async def test_wrong_token_is_a_login_failure(dc: FakeDiscord) -> None:
    client = ReplyingClient()
    try:
        with pytest.raises(discord.LoginFailure):
            await client.start("not-the-token")
    finally:
        await client.close()
    assert dc.calls[0].route == "GET /users/@me" and dc.calls[0].status == 401
    assert dc.identify is None


async def test_rest_errors_map_to_discord_exceptions(dc: FakeDiscord) -> None:
    cid = dc.guilds[0].channel_id
    async with running(ReplyingClient()) as client:
        channel = client.get_channel(cid)
        assert isinstance(channel, discord.TextChannel)
        with pytest.raises(discord.NotFound) as missing:
            await channel.get_partial_message(123456789).edit(content="nope")
        assert missing.value.code == 10008
        with pytest.raises(discord.HTTPException) as too_long:
            await channel.send("x" * 2001)
        assert (too_long.value.status, too_long.value.code) == (400, 50035)
        assert "2000 or fewer" in too_long.value.text
        await dc.inject_message("mine", USER_ID)
        theirs = await dc.wait_until(lambda: dc.channel_messages(cid))
        with pytest.raises(discord.Forbidden):
            await channel.get_partial_message(int(theirs[0]["id"])).edit(content="hijack")
        await channel.send("x" * 2000)
    assert dc.channel_texts(cid) == ["mine", "x" * 2000]


async def test_upload_delete_and_opening_a_dm(dc: FakeDiscord) -> None:
    cid = dc.guilds[0].channel_id
    async with running(ReplyingClient()) as client:
        channel = client.get_channel(cid)
        assert isinstance(channel, discord.TextChannel)
        sent = await channel.send("notes", file=discord.File(io.BytesIO(b"a,b\n"), "notes.csv"))
        assert [a.filename for a in sent.attachments] == ["notes.csv"]
        assert dc.calls[-1].files == {"notes.csv": b"a,b\n"}
        await sent.delete()
        dm = await client.create_dm(discord.Object(id=USER_ID))
        await dm.send("a reminder")
    assert dc.channel_messages(cid) == []
    assert dc.channel_texts(dc.dm_channel_id(USER_ID)) == ["a reminder"]


async def test_reconnect_resumes_and_messages_still_flow(dc: FakeDiscord) -> None:
    async with running(ReplyingClient()) as client:
        await dc.wait_ready()
        await dc.send_reconnect()
        await asyncio.wait_for(client.resumed.wait(), scaled(5))
        await dc.wait_ready()
        await dc.inject_message("still there?", USER_ID, guild=False)
        await dc.wait_for("PATCH ")
    ops = [p["op"] for p in dc.gateway_received if p["op"] != 1]
    assert ops == [2, 6]
    assert dc.channel_texts(dc.dm_channel_id(USER_ID))[-1] == "you said: still there?"


async def test_standalone_process_serves_a_real_client() -> None:
    command = [sys.executable, "-m", "tests.fakes.discord", "--port", "0"]
    proc = await asyncio.create_subprocess_exec(*command, cwd=ROOT, stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), scaled(10))).decode().strip()
        assert line.startswith("listening on http://127.0.0.1:")
        url = line.removeprefix("listening on ")
        gateway = url.replace("http://", "ws://") + "/gateway"
        with discord_endpoints(url + "/api/v10", gateway):
            async with running(ReplyingClient(), token="any token works") as client:
                assert client.get_channel(DEFAULT_GUILDS[0].channel_id) is not None
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), scaled(10)) == 0


async def test_raw_answers_have_discords_shapes(dc: FakeDiscord) -> None:
    """What discord.py relies on: exact Content-Type, JSON error bodies, the gateway info."""
    auth = {"Authorization": f"Bot {DEFAULT_TOKEN}"}
    async with aiohttp.ClientSession(headers=auth) as http:
        async with http.get(dc.api_base + "/gateway/bot") as resp:
            assert resp.headers["Content-Type"] == "application/json"
            info = await resp.json()
            assert (info["url"], info["shards"]) == (dc.gateway_url, 1)
        async with http.get(dc.api_base + "/guilds/1/roles") as resp:
            assert resp.status == 404 and (await resp.json())["code"] == 0
        channel = f"{dc.api_base}/channels/{dc.guilds[0].channel_id}/messages"
        async with http.post(
            channel, data=b"{oops", headers={"Content-Type": "application/json"}
        ) as resp:
            assert resp.status == 400 and (await resp.json())["code"] == 50109
        async with http.post(channel, json={"content": ""}) as resp:
            assert resp.status == 400 and (await resp.json())["code"] == 50006
        async with http.post(dc.api_base + "/channels/5/typing") as resp:
            assert resp.status == 404 and (await resp.json())["code"] == 10003
    async with aiohttp.ClientSession() as http, http.get(dc.api_base + "/users/@me") as resp:
        assert resp.status == 401 and resp.headers["Content-Type"] == "application/json"
    assert [c.status for c in dc.calls] == [200, 404, 400, 400, 404, 401]
    assert dc.channel_messages(dc.guilds[0].channel_id) == []


async def test_command_syncs_keep_localizations_and_refuse_bad_ones(dc: FakeDiscord) -> None:
    auth = {"Authorization": f"Bot {DEFAULT_TOKEN}"}
    url = f"{dc.api_base}/applications/{dc.bot_id}/commands"
    good = {
        "name": "recall",
        "description": "recaps",
        "description_localizations": {"zh-CN": "回顾"},
    }
    option = {"type": 3, "name": "what", "description": "what",
              "description_localizations": {"es-419": "x" * 101}}  # fmt: skip
    async with aiohttp.ClientSession(headers=auth) as http:
        async with http.put(url, json=[good]) as resp:
            assert resp.status == 200
        async with http.put(
            url, json=[{**good, "description_localizations": {"zh": "回顾"}}]
        ) as resp:
            assert resp.status == 400 and "0.description_localizations" in await resp.text()
        async with http.put(url, json=[{**good, "options": [option]}]) as resp:
            assert resp.status == 400
            assert "0.options.0.description_localizations.es-419" in await resp.text()
    assert dc.app_commands["global"][0]["description_localizations"] == {"zh-CN": "回顾"}


def test_endpoints_are_set_and_restored() -> None:
    before = current_discord_endpoints()
    previous = use_discord_endpoints("http://127.0.0.1:9/api/v10/", "ws://127.0.0.1:9/gateway")
    try:
        assert previous == before
        assert discord.http.Route("GET", "/users/@me").url == "http://127.0.0.1:9/api/v10/users/@me"
        assert str(discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY) == "ws://127.0.0.1:9/gateway"
    finally:
        restore_discord_endpoints(previous)
    assert current_discord_endpoints() == before
    assert discord.http.Route.BASE == "https://discord.com/api/v10"


@pytest.mark.parametrize(
    ("api_base", "gateway_url", "key"),
    [
        ("ws://127.0.0.1:9/api/v10", "ws://127.0.0.1:9/gateway", "discord.api_base"),
        ("/api/v10", "ws://127.0.0.1:9/gateway", "discord.api_base"),
        ("http://127.0.0.1:9/api/v10", "http://127.0.0.1:9/gateway", "discord.gateway_url"),
    ],
)
def test_bad_endpoints_are_refused_and_change_nothing(
    api_base: str, gateway_url: str, key: str
) -> None:
    before = current_discord_endpoints()
    with pytest.raises(ConfigError, match=key):
        use_discord_endpoints(api_base, gateway_url)
    assert current_discord_endpoints() == before


# -- attachments: what Discord sends, and the bytes behind each url ----------------------


def picture(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), "green").save(out, format="PNG")
    return out.getvalue()


async def received(dc: FakeDiscord, client: ReplyingClient, **kwargs: object) -> discord.Message:
    """Inject a DM with `kwargs` and wait until the client has it."""
    before = len(client.seen)
    await dc.inject_message(kwargs.pop("content", ""), USER_ID, guild=False, **kwargs)  # type: ignore[arg-type]
    await dc.wait_until(lambda: len(client.seen) > before)
    return client.seen[-1]


async def test_files_arrive_with_content_type_size_and_image_size_and_read_back(
    dc: FakeDiscord,
) -> None:
    png, pdf = picture(640, 480), b"%PDF-1.4"
    async with running(ReplyingClient()) as client:
        await dc.wait_ready()
        message = await received(
            dc, client, content="look", files={"cat.png": png, "plan": (pdf, "application/pdf")}
        )
        image, document = message.attachments
        assert (image.filename, image.content_type, image.size) == (
            "cat.png",
            "image/png",
            len(png),
        )
        assert (image.width, image.height) == (640, 480)
        assert (document.content_type, document.width) == ("application/pdf", None)
        assert "?ex=" in image.url and not image.is_voice_message()
        assert await image.read() == png
        assert await document.read() == pdf
    assert dc.downloads == [str(image.id), str(document.id)]


async def test_the_bytes_are_served_with_their_content_type(dc: FakeDiscord) -> None:
    async with running(ReplyingClient()) as client:
        await dc.wait_ready()
        message = await received(dc, client, files={"memo.mp3": (b"ID3", "audio/mpeg")})
    attachment = message.attachments[0]
    async with aiohttp.ClientSession() as http:
        for url in (attachment.url, attachment.proxy_url):
            async with http.get(url) as answer:
                assert answer.status == 200
                assert answer.headers["Content-Type"] == "audio/mpeg"
                assert await answer.read() == b"ID3"


async def test_a_voice_message_has_the_flag_duration_and_waveform(dc: FakeDiscord) -> None:
    async with running(ReplyingClient()) as client:
        await dc.wait_ready()
        message = await received(dc, client, voice=b"OggS voice", voice_seconds=4.2)
        [voice] = message.attachments
        assert message.flags.voice
        assert (voice.filename, voice.content_type) == ("voice-message.ogg", "audio/ogg")
        assert voice.is_voice_message() and voice.duration == 4.2 and voice.waveform
        assert await voice.read() == b"OggS voice"


async def test_sizes_can_be_misreported_and_old_attachments_still_work(dc: FakeDiscord) -> None:
    async with running(ReplyingClient()) as client:
        await dc.wait_ready()
        lying = await received(dc, client, files={"big.ogg": FakeFile(b"tiny", size=30 << 20)})
        old = await received(dc, client, content="hi", attachments=("x.png",))
        assert lying.attachments[0].size == 30 << 20
        assert await lying.attachments[0].read() == b"tiny"
        [plain] = old.attachments
        assert (plain.filename, plain.content_type, plain.size) == ("x.png", None, 9)
        assert await plain.read() == b"fake file"


async def test_a_broken_attachment_404s_and_a_slow_one_is_held(dc: FakeDiscord) -> None:
    async with running(ReplyingClient()) as client:
        await dc.wait_ready()
        message = await received(dc, client, files={"a.ogg": b"OggS a", "b.ogg": b"OggS b"})
        broken, slow = message.attachments
        dc.broken_files.add("a.ogg")
        dc.slow_files[str(slow.id)] = 30.0
        with pytest.raises(discord.NotFound):
            await broken.read()
        late = asyncio.create_task(slow.read())
        await dc.wait_until(lambda: dc.held_downloads == 1)
        assert not late.done()
        dc.release_files()
        assert await asyncio.wait_for(late, timeout=scaled(5)) == b"OggS b"


async def test_a_slow_attachment_outlasts_a_client_timeout(dc: FakeDiscord) -> None:
    async with running(ReplyingClient()) as client:
        await dc.wait_ready()
        message = await received(dc, client, files={"slow.ogg": b"OggS"})
        dc.slow_files["slow.ogg"] = 30.0
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(message.attachments[0].read(), timeout=scaled(0.2))
        dc.release_files()  # the held handler ends before the fake stops


class EditWatcher(ReplyingClient):
    """Records discord.py's message edit and delete events, raw and cached."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, object]] = []

    async def on_message_edit(self, before: discord.Message, after: discord.Message) -> None:
        self.events.append(("edit", (before.content, after.content)))

    async def on_raw_message_edit(self, event: discord.RawMessageUpdateEvent) -> None:
        self.events.append(("raw edit", (event.message_id, event.message.content)))

    async def on_raw_message_delete(self, event: discord.RawMessageDeleteEvent) -> None:
        self.events.append(("raw delete", event.message_id))

    async def on_raw_bulk_message_delete(self, event: discord.RawBulkMessageDeleteEvent) -> None:
        self.events.append(("raw bulk delete", sorted(event.message_ids)))


async def test_edits_and_deletions_reach_discord_py_as_its_events(dc: FakeDiscord) -> None:
    async with running(EditWatcher()) as client:
        await dc.wait_ready()
        channel = dc.guilds[0].channel_id
        first = await dc.inject_message("tpyo", USER_ID, channel_id=channel)
        second = await dc.inject_message("two", USER_ID, channel_id=channel)
        await dc.inject_edit(channel, int(first["id"]), "typo")
        await dc.inject_delete(channel, int(first["id"]))
        await dc.inject_delete(channel, int(second["id"]), 42)
        await wait_until(lambda: len(client.events) == 4)  # the fake hears of no event
    one, two = int(first["id"]), int(second["id"])
    assert client.events == [
        ("raw edit", (one, "typo")),
        ("edit", ("tpyo", "typo")),
        ("raw delete", one),
        ("raw bulk delete", sorted([two, 42])),
    ]
    assert dc.channel_texts(channel) == []
    assert first["edited_timestamp"] is not None

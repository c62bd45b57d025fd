"""Discord's slash commands and buttons, built from the command menu.

Every `CommandSpec` the adapter gets at start (everyone's commands, as in
Telegram's menu) becomes a slash command of an `app_commands.CommandTree`; its
arguments become string options (``/recall what:``), described with
`app_commands.describe`. `sync` registers them at start: to each server of
`discord.guild_ids` (instant, for development) or globally (Discord may take
up to an hour to show them). Stale global commands of an
earlier global sync are left alone.

An invocation is deferred at once (Discord's 3-second window), then handed to
the inbox as the text ``/name <options>``, so it runs the same command as a
typed one; the reply replaces the deferred "thinking…" response and goes on in
follow-ups, split at 2,000 characters with balanced fences, mass mentions never
pinging, choices as buttons. In a server the reply is ephemeral (only the
person sees it: commands show what the bot holds about them); in a DM it is an
ordinary message. A button whose custom_id is a choice payload (``choice:…``)
is acknowledged without a visible change and handed to `Inbox.choose` as the
clicker's; the answer (a refusal when someone else clicked) goes only to the
clicker in a server. Servers outside `discord.allowed_guilds` get one line, in the
language of the person's Discord (the interaction's locale).

Descriptions are localized the documented discord.py way: each is a
`app_commands.locale_str` carrying its text per shipped language, and the tree's
`MenuTranslator` gives Discord each locale's (zh-CN and zh-TW the Chinese, es-ES
and es-419 the Spanish), so Discord shows a person the menu in their language.
Names stay as they are.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import discord
from discord import app_commands

from gateway.config import DiscordConfig
from gateway.delivery import ChannelLimits, ChatThrottle, StreamedReply, images_as_links
from gateway.errors import ConfigError, DeliveryError, RateLimitedError
from gateway.i18n import DEFAULT_LANGUAGE, N_, Catalogs, Translator, negotiate
from gateway.messages import CHOICE_PREFIX, Choice, CommandSpec, InboundMessage, Inbox, ReplySink

log = logging.getLogger(__name__)

MAX_CHARS = 2000  # one Discord message
MAX_DESCRIPTION = 100  # a command's or option's description
MAX_LABEL = 80  # a button's label
MAX_BUTTONS = 25  # buttons on one message (5 rows of 5)
ORIGINAL = "@original"  # the id `InteractionChannel.send` gives the deferred response
NO_PINGS = discord.AllowedMentions.none()
FOREIGN_SERVER_LINE = N_(
    "Sorry, this bot does not serve this server (id {server}); the bot's operator can add "
    "it to discord.allowed_guilds."
)

InboundFactory = Callable[[discord.Interaction, str], InboundMessage]
SinkFactory = Callable[[InboundMessage, discord.Interaction], ReplySink]
Lines = Callable[[str | None], Translator]
"""The translator for the adapter's own lines to a person, from their platform's hint."""
T = TypeVar("T")


def hinted_lines(catalogs: Catalogs, language: str = DEFAULT_LANGUAGE) -> Lines:
    """A person's lines in the shipped language their hint names, else in `language`."""

    def lines(hint: str | None) -> Translator:
        return catalogs.translator(negotiate(hint) or language)

    return lines


class MenuTranslator(app_commands.Translator):
    """Gives Discord each locale's text of the menu's descriptions: the one a description's
    `locale_str` carries (``extras["texts"]``, language -> text) for the shipped language
    the locale is, when it differs from the description itself. Anything else (names) is
    left as it is."""

    async def translate(
        self,
        string: app_commands.locale_str,
        locale: discord.Locale,
        context: app_commands.TranslationContextTypes,
    ) -> str | None:
        texts = string.extras.get("texts")
        language = negotiate(str(locale))
        if not isinstance(texts, Mapping) or language is None:
            return None
        text = texts.get(language)
        return text if isinstance(text, str) and text and text != string.message else None


def described(text: str, fallback: str, texts: Mapping[str, str]) -> app_commands.locale_str:
    """A description (at most Discord's 100 characters, `fallback` when empty) with its
    text per language (each shortened the same way), for `MenuTranslator`."""
    shortened = {
        language: _shortened(line, MAX_DESCRIPTION) for language, line in texts.items() if line
    }
    return app_commands.locale_str(_shortened(text, MAX_DESCRIPTION) or fallback, texts=shortened)


def interaction_message(interaction: discord.Interaction, text: str) -> InboundMessage:
    """`text` as sent by the person behind `interaction`, where they used it.

    A DM is a private chat; a server channel a group chat; a thread is its
    parent channel with the thread's id as `thread_id`.
    """
    channel, user = interaction.channel, interaction.user
    chat_id, thread_id = str(interaction.channel_id), None
    if isinstance(channel, discord.Thread):
        chat_id, thread_id = str(channel.parent_id), str(channel.id)
    return InboundMessage(
        platform="discord",
        chat_id=chat_id,
        chat_type="private" if interaction.guild_id is None else "group",
        user_id=str(user.id),
        text=text,
        message_id=str(interaction.id),
        user_name=user.display_name,
        thread_id=thread_id,
        language=str(interaction.locale) if interaction.locale else None,
    )


def choice_view(choices: Sequence[Choice]) -> discord.ui.View | None:
    """`choices` as buttons whose custom_id is the choice's payload (None: no choices).

    The view is stopped before it is sent, so discord.py does not keep it in its
    view store: clicks are routed by custom_id (`DiscordCommands.on_interaction`).
    """
    if not choices:
        return None
    if len(choices) > MAX_BUTTONS:
        log.warning("discord: %d choices, showing the first %d", len(choices), MAX_BUTTONS)
    view = discord.ui.View(timeout=None)
    for choice in choices[:MAX_BUTTONS]:
        label = _shortened(choice.label, MAX_LABEL) or "…"
        view.add_item(discord.ui.Button(label=label, custom_id=choice.payload))
    view.stop()
    return view


class InteractionChannel:
    """The replies to one interaction as a `gateway.delivery.Channel`.

    The first message sent edits the deferred response (`use_original`; a
    button's is the message with the buttons, so clicks start with follow-ups),
    later ones are follow-ups; `ephemeral` makes follow-ups visible only to the
    person. Discord takes the flag that suppresses embeds only when a follow-up is
    sent: a message whose embeds must stay off is sent as a follow-up (the deferred
    response deleted first, when it is still free), and an edit that would need the
    flag on a message sent without it is refused, so the reply sends afresh.
    """

    def __init__(
        self,
        interaction: discord.Interaction,
        *,
        ephemeral: bool,
        edit_interval: float,
        use_original: bool = True,
    ) -> None:
        self._interaction, self._ephemeral = interaction, ephemeral
        self._original_free = use_original
        self._suppressed: set[str] = set()  # the messages sent with embeds suppressed
        self.sent = 0  # messages sent (the deferred response counts once edited)
        self.limits = ChannelLimits(max_units=MAX_CHARS, units=len, edit_interval=edit_interval)

    async def send(
        self,
        text: str,
        *,
        reply_to: str | None = None,
        choices: Sequence[Choice] = (),
        previews: bool = False,
    ) -> str:
        """The deferred response edited to `text` the first time (unless embeds must stay
        off), else a follow-up; images as links."""
        content = images_as_links(text)
        options: dict[str, Any] = {"content": content, "allowed_mentions": NO_PINGS}
        view = choice_view(choices)
        if view is not None:
            options["view"] = view
        if self._original_free and previews:
            self._original_free = False
            await _translated(self._interaction.edit_original_response(**options))
            self.sent += 1
            return ORIGINAL
        if self._original_free:  # it cannot take the flag: the reply goes as a follow-up
            self._original_free = False
            await _translated(self._interaction.delete_original_response())
        followup = self._interaction.followup
        sent = await _translated(
            followup.send(
                wait=True, ephemeral=self._ephemeral, suppress_embeds=not previews, **options
            )
        )
        self.sent += 1
        if not previews:
            self._suppressed.add(str(sent.id))
        return str(sent.id)

    async def edit(self, message_id: str, text: str, *, previews: bool = False) -> None:
        """Replace a sent message's text; refused when embeds must stay off and the
        message was sent without their flag (Discord takes it only with a follow-up)."""
        if not previews and message_id not in self._suppressed:
            raise DeliveryError("embeds cannot be suppressed in an edit of this message")
        text = images_as_links(text)
        if message_id == ORIGINAL:
            await _translated(
                self._interaction.edit_original_response(content=text, allowed_mentions=NO_PINGS)
            )
        else:
            await _translated(
                self._interaction.followup.edit_message(
                    int(message_id), content=text, allowed_mentions=NO_PINGS
                )
            )

    async def draft(self, draft_id: int, text: str) -> None:
        raise DeliveryError("Discord has no drafts")  # never called: limits.drafts is False

    async def typing(self) -> None:
        """Nothing: the deferred response already shows that the bot is thinking."""

    async def send_document(self, path: Path) -> str:
        """The file at `path` as a follow-up attachment (an /export); its message id."""
        file = attachment(path)
        followup = self._interaction.followup
        try:
            sent = await _translated(followup.send(file=file, wait=True, ephemeral=self._ephemeral))
        finally:
            file.close()
        self.sent += 1
        return str(sent.id)

    async def withdraw(self) -> None:
        """Delete the deferred response when nothing replaced it (a quiet refusal)."""
        if self._original_free and self.sent == 0:
            self._original_free = False
            await _translated(self._interaction.delete_original_response())


class DiscordCommands:
    """The command menu as Discord slash commands, and the choice buttons.

    `commands` are the menu `Adapter.start` gets (a name Discord refuses is
    left out, with a warning). `sink_factory` replaces the reply through the
    interaction's follow-ups (an adapter with its own delivery); `inbound`
    builds the message of an interaction (it must agree with the adapter's
    messages, so a command lands in the same session); `lines` translates the
    commands' own lines to a person (by default English for every hint).
    """

    def __init__(
        self,
        client: discord.Client,
        inbox: Inbox,
        commands: Iterable[CommandSpec],
        config: DiscordConfig,
        sink_factory: SinkFactory | None = None,
        *,
        inbound: InboundFactory = interaction_message,
        lines: Lines | None = None,
    ) -> None:
        self._inbox, self._config = inbox, config
        self._lines = lines or hinted_lines(Catalogs())
        self._inbound, self._sink_factory = inbound, sink_factory
        self.tree: app_commands.CommandTree[discord.Client] = app_commands.CommandTree(client)
        self._guilds: list[discord.Object | None] = [
            discord.Object(id=_server_id(gid)) for gid in config.guild_ids
        ] or [None]  # None: global
        self.slash = [self._slash(spec) for spec in commands if _valid(spec)]
        for slash in self.slash:
            for guild in self._guilds:
                self.tree.add_command(slash, guild=guild)

    async def sync(self) -> None:
        """Register the commands with Discord: to each of `guild_ids`, else globally.

        A refusal (the bot not in that server, or invited without the
        ``applications.commands`` scope) is logged in one line; messages are
        still answered. Descriptions go with their translations (`MenuTranslator`).
        """
        if self.tree.translator is None:
            await self.tree.set_translator(MenuTranslator())
        for guild in self._guilds:
            where = f"to server {guild.id}" if guild is not None else "globally"
            try:
                synced = await self.tree.sync(guild=guild)
            except (discord.DiscordException, OSError) as error:
                log.error("discord: slash commands not synced %s: %s", where, error)
                continue
            log.info("discord: %d slash commands synced %s", len(synced), where)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Handle a click on a choice button; other interactions are not ours (the
        tree answers application commands by itself)."""
        if interaction.type is not discord.InteractionType.component:
            return
        data: dict[str, Any] = dict(interaction.data or {})
        custom_id = data.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id.startswith(CHOICE_PREFIX):
            return
        try:
            if not await self._guild_admitted(interaction):
                return
            await interaction.response.defer()  # a component: acknowledged, nothing shown
            message = self._inbound(interaction, "")
            sink, _ = self._reply(message, interaction, use_original=False)
            await self._inbox.choose(message, custom_id, sink)
            await sink.finish()
        except discord.NotFound as error:  # later than Discord's 3 s, or already answered
            log.warning("discord: a button press could not be answered: %s", error)
        except Exception:  # the top of an adapter callback
            log.exception("discord: a button press failed")

    # ----- slash commands ----------------------------------------------------------

    def _slash(self, spec: CommandSpec) -> app_commands.Command[Any, ..., None]:
        """The slash command ``/name``: one string option per argument."""
        name, arguments = spec.name, spec.arguments
        names = [argument.name.lower() for argument in arguments]

        async def invoke(interaction: discord.Interaction, **options: str | None) -> None:
            values = (str(options.get(option) or "").strip() for option in names)
            await self._invoke(interaction, " ".join([f"/{name}", *filter(None, values)]))

        parameters = [
            inspect.Parameter(
                "interaction",
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                annotation=discord.Interaction,
            )
        ]
        for option, argument in zip(names, arguments, strict=True):
            default = inspect.Parameter.empty if argument.required else None
            annotation = str if argument.required else str | None
            parameters.append(
                inspect.Parameter(
                    option, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
                )
            )
        translations = spec.translations.items()
        options = {
            option: described(
                a.description,
                option,
                {language: _nth(text.arguments, i) for language, text in translations},
            )
            for i, (option, a) in enumerate(zip(names, arguments, strict=True))
        }
        # discord.py reads a callback's options from its signature; these vary per command
        setattr(invoke, "__signature__", inspect.Signature(parameters))  # noqa: B010
        texts = {language: text.description for language, text in translations}
        return app_commands.Command(
            name=name.lower(),
            description=described(spec.description, name, texts),
            callback=app_commands.describe(**options)(invoke),
        )

    async def _invoke(self, interaction: discord.Interaction, text: str) -> None:
        """One slash command: defer, hand it to the inbox, deliver the reply."""
        try:
            if not await self._guild_admitted(interaction):
                return
            await interaction.response.defer(
                thinking=True, ephemeral=interaction.guild_id is not None
            )
            message = self._inbound(interaction, text)
            sink, channel = self._reply(message, interaction, use_original=True)
            await self._inbox.handle(message, sink)
            await sink.finish()
            if channel is not None:
                await channel.withdraw()
        except discord.NotFound as error:  # later than Discord's 3 s, or already answered
            log.warning("discord: a slash command could not be answered: %s", error)
        except Exception:  # the top of an adapter callback
            log.exception("discord: a slash command failed")

    def _reply(
        self, message: InboundMessage, interaction: discord.Interaction, *, use_original: bool
    ) -> tuple[ReplySink, InteractionChannel | None]:
        if self._sink_factory is not None:
            return self._sink_factory(message, interaction), None
        channel = InteractionChannel(
            interaction,
            ephemeral=interaction.guild_id is not None,
            edit_interval=self._config.edit_interval,
            use_original=use_original,
        )
        throttle = ChatThrottle(self._config.edit_interval)  # one webhook token, its own pace
        return StreamedReply(channel, throttle, reply_to=None, private=False), channel

    async def _guild_admitted(self, interaction: discord.Interaction) -> bool:
        """Whether the interaction's server is served; if not, the person is told."""
        allowed = self._config.allowed_guilds
        if interaction.guild_id is None or not allowed or str(interaction.guild_id) in allowed:
            return True
        log.info("discord: refused an interaction in server %s", interaction.guild_id)
        lines = self._lines(str(interaction.locale) if interaction.locale else None)
        await interaction.response.send_message(
            lines._(FOREIGN_SERVER_LINE, server=interaction.guild_id), ephemeral=True
        )
        return False


def _valid(spec: CommandSpec) -> bool:
    """Whether Discord takes the command's name and option names (else it is left out)."""
    names = [spec.name, *(a.name for a in spec.arguments)]
    bad = [
        n
        for n in names
        if not 1 <= len(n) <= 32 or not n.replace("-", "").replace("_", "").isalnum()
    ]
    if bad:
        log.warning("discord: /%s is not a valid slash command name; left out", spec.name)
    return not bad


def _server_id(value: str) -> int:
    if not value.isdigit():
        raise ConfigError(f"discord.guild_ids: {value!r} is not a server id (digits only)")
    return int(value)


def _nth(texts: tuple[str, ...], index: int) -> str:
    return texts[index] if index < len(texts) else ""


def _shortened(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@contextlib.contextmanager
def mapped_errors() -> Iterator[None]:
    """discord.py's errors as the gateway's: 429 -> RateLimitedError, others DeliveryError."""
    try:
        yield
    except discord.RateLimited as error:
        wait = error.retry_after
        raise RateLimitedError(f"Discord asks to wait {wait:g} s", wait) from error
    except discord.HTTPException as error:
        if error.status == 429:
            raise RateLimitedError("Discord asks to wait (429)", 1.0) from error
        raise DeliveryError(f"Discord refused the call: {error.status} {error.text}") from error
    except (discord.DiscordException, OSError, TimeoutError) as error:
        raise DeliveryError(f"Discord could not be reached: {type(error).__name__}") from error


async def _translated(call: Awaitable[T]) -> T:
    """Await a discord.py call; Discord's refusals as the gateway's delivery errors."""
    with mapped_errors():
        return await call


def attachment(path: Path) -> discord.File:
    """The file at `path` to upload (the caller closes it); `DeliveryError` if unreadable."""
    try:
        return discord.File(path, filename=path.name)
    except OSError as error:
        raise DeliveryError(f"cannot read {path.name}: {error.strerror}") from None

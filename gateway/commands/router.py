"""Running a command or a picked choice for one message, whatever the platform.

`CommandRouter` decides what a "/x" message does: a registered command runs
(admin-only ones only for admins) and its reply, with any choices, goes to the
sink (a document is attached and sent at once, and the reply's `after_sent`
runs then); an unknown one points to /help in a private chat and is ignored in a
group unless addressed to this bot; one addressed to another bot is ignored.
A picked choice (a pressed button) runs its command's `on_choice`, or is
refused in one line. A command or a press delivered twice runs once
(`gateway.deliveries`): the caller asks `first_delivery` before routing a
command, and `choose` asks itself for a press. The caller holds the session's
lock; the router makes each `CommandContext` from the message's
`MessageIdentity`, and commands reach anything else only through what they
were built with.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from gateway.commands.choices import PendingChoices
from gateway.commands.registry import CommandCall, CommandContext, CommandRegistry
from gateway.deliveries import Deliveries, DeliveryLog
from gateway.errors import ChoiceRefusedError
from gateway.i18n import LANGUAGES, N_, Translator
from gateway.messages import (
    ChoiceSink,
    CommandSpec,
    CommandText,
    DocumentSink,
    InboundMessage,
    MessageIdentity,
    ReplySink,
)
from gateway.person_locale import PersonLocale, PersonLocales
from memory_core import PersonErasedError

log = logging.getLogger(__name__)

FAILED_LINE = N_("(something went wrong on my side; please try again)")
ERASED_LINE = N_("(everything I held about you was just erased, this message with it)")


class CommandRouter:
    """Routes commands and picked choices to the registry's handlers."""

    def __init__(
        self,
        registry: CommandRegistry,
        choices: PendingChoices,
        is_admin: Callable[[str, str], bool],
        locales: PersonLocales | None = None,
        deliveries: DeliveryLog | None = None,
    ) -> None:
        """`is_admin(platform, user_id)`: whether the person may use admin-only commands;
        `locales`: the catalogs and default language the menu is translated with (None:
        the menu as the commands describe themselves, in English); `deliveries`: where
        commands and presses are recorded as they arrive, so that one delivered twice
        runs once (None: each runs as often as it arrives)."""
        self._registry = registry
        self._choices = choices
        self._is_admin = is_admin
        self._locales = locales
        self._deliveries = Deliveries(deliveries)

    @property
    def menu(self) -> list[CommandSpec]:
        """The commands everyone may use, for the platforms' command menus: described in
        the default language, with their text in every shipped language."""
        specs = [command.spec for command in self._registry if not command.admin_only]
        if self._locales is None:
            return specs
        catalogs = self._locales.catalogs
        translators = [catalogs.translator(language) for language in LANGUAGES]
        default = self._locales.default().language
        return [_translated(spec, translators, default) for spec in specs]

    def needs_session(self, call: CommandCall) -> bool:
        """Whether `call` must wait for its session's turn in progress (see `Command`)."""
        command = self._registry.get(call.name)
        return command is not None and command.needs_session

    async def first_delivery(self, message: InboundMessage) -> bool:
        """Whether the command `message` arrives for the first time (a duplicate is not
        routed); `PostgresUnavailableError` when that cannot be known (not stored)."""
        return await self._deliveries.first_command(message)

    async def route(
        self,
        identity: MessageIdentity,
        message: InboundMessage,
        call: CommandCall,
        sink: ReplySink,
        locale: PersonLocale,
    ) -> None:
        """Run a registered command; point to /help for an unknown one in a private chat.
        `locale`: the sender's, for every line of the reply."""
        ours = (message.bot_username or "").lstrip("@").lower()
        if call.target is not None and ours and call.target.lower() != ours:
            return  # addressed to another bot
        command = self._registry.get(call.name)
        if command is None:
            if message.chat_type != "group" or (ours and call.target is not None):
                line = locale._("Unknown command /{name}; see /help for the list.", name=call.name)
                await sink.write(line)
            return
        is_admin = self._is_admin(identity.platform, identity.user_id)
        if command.admin_only and not is_admin:
            await sink.write(locale._("/{name} is for admins only.", name=command.name))
            return
        context = CommandContext(message, identity, call.args, is_admin, locale)
        reply = await command.handler(context)
        attaching = reply.document is not None and isinstance(sink, DocumentSink)
        if attaching or reply.unattached_text is None:
            await sink.write(reply.as_text())
        else:
            await sink.write(reply.unattached_text)
        if reply.choices and isinstance(sink, ChoiceSink):  # buttons, where the sink has them
            await sink.offer(reply.choices)
        if attaching and reply.document is not None and isinstance(sink, DocumentSink):
            await sink.attach(reply.document)  # the file itself, sent when the reply finishes
            await sink.finish()  # so it is sent now; finishing it again does nothing
            if reply.after_sent is not None:
                reply.after_sent()

    async def choose(
        self,
        identity: MessageIdentity,
        message: InboundMessage,
        payload: str,
        sink: ReplySink,
        locale: PersonLocale,
    ) -> None:
        """Apply a picked choice; a forged, used, expired or foreign one is refused in one
        line; one delivered before does nothing (`PostgresUnavailableError` propagates)."""
        if not await self._deliveries.first_press(message, payload):
            return  # answered where it arrived first
        try:
            picked = self._choices.take(payload, identity.user_key)
            command = self._registry.get(picked.command)
            is_admin = self._is_admin(identity.platform, identity.user_id)
            if command is None or command.on_choice is None:
                raise ChoiceRefusedError(N_("That choice no longer leads anywhere."))
            if command.admin_only and not is_admin:
                raise ChoiceRefusedError(N_("/{name} is for admins only."), name=command.name)
            context = CommandContext(message, identity, "", is_admin, locale)
            await sink.write((await command.on_choice(context, picked)).as_text())
        except ChoiceRefusedError as exc:
            await sink.write(exc.line(locale))
        except PersonErasedError:  # erased while the press was in flight: nothing was kept
            log.info("session %s: the person was erased meanwhile", identity.session_key)
            await sink.write(locale._(ERASED_LINE))
        except Exception:  # the top of a callback: log it, tell the person, keep serving
            log.exception("choice failed in session %s", identity.session_key)
            await sink.write(locale._(FAILED_LINE))


def _translated(spec: CommandSpec, translators: list[Translator], default: str) -> CommandSpec:
    """`spec` described in `default`, with its text in each of `translators`' languages."""
    texts = {
        t.language: CommandText(
            _line(t, spec.description), tuple(_line(t, a.description) for a in spec.arguments)
        )
        for t in translators
    }
    text = texts.get(default) or spec.text(default)
    arguments = tuple(
        replace(argument, description=described)
        for argument, described in zip(spec.arguments, text.arguments, strict=True)
    )
    return replace(spec, description=text.description, arguments=arguments, translations=texts)


def _line(translator: Translator, text: str) -> str:
    """`text` translated (an empty one stays empty: gettext's "" is the catalog's header)."""
    return translator._(text) if text else text

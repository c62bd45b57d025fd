"""The built-in commands: /start, /help, /new, /stop, /recall, /memory, /forget, /export,
/skills, /status and (admins) /promote and /allow, each bound to what it works on when built."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.agent.recall import Recapper
from gateway.commands.allow import allow_command
from gateway.commands.choices import PendingChoices
from gateway.commands.erase import PendingErasures, export_command, forget_with_erasure_command
from gateway.commands.info import help_command, skills_command, start_command, status_command
from gateway.commands.memory import forget_command, memory_command
from gateway.commands.memory_pending import PendingReview, with_pending
from gateway.commands.recall import recall_command
from gateway.commands.registry import (
    Command,
    CommandContext,
    CommandRegistry,
    CommandReply,
    SessionControl,
)
from gateway.commands.settings import settings_command
from gateway.commands.skills import promote_command
from gateway.i18n import N_
from gateway.pairing import AccessList
from gateway.person_locale import PersonLocales
from memory_core import (
    MemoryBackend,
    NoticeMode,
    PendingChanges,
    PersonData,
    SessionBackend,
    SkillsStore,
)


@dataclass(frozen=True)
class CommandResources:
    """What the built-in commands work on, bound when they are built."""

    memory: MemoryBackend
    skills: SkillsStore
    sessions: SessionBackend
    recapper: Recapper
    """The auxiliary model, which writes /recall's recaps."""
    recall_timeout: float
    model_name: str
    """The chat model's name, for /status."""
    person: PersonData
    """The person's data across the stores, for /forget all and /export."""
    open_sessions: SessionControl
    locales: PersonLocales | None = None
    """Each person's language, zone and settings, for /settings (None: no /settings)."""
    notifications: NoticeMode = "on"
    """The config's background-notice mode (`memory.notifications`), a person's default."""


def builtin_commands(
    resources: CommandResources,
    choices: PendingChoices,
    erasures: PendingErasures | None = None,
    access: AccessList | None = None,
) -> CommandRegistry:
    """A registry holding the built-in commands over `resources`; `choices`: the choices
    they offer, until picked; `erasures`: the `/forget all` requests awaiting confirmation
    (by default a table of its own); `access`: the data directory's list, which /allow
    adds to (None: no /allow)."""
    r = resources
    registry = CommandRegistry()
    registry.register(start_command(registry))
    registry.register(help_command(registry))
    registry.register(new_command(r.open_sessions))
    registry.register(stop_command(r.open_sessions))
    registry.register(recall_command(r.sessions, r.recapper, r.recall_timeout, r.memory))
    memory = memory_command(r.memory, r.open_sessions, r.person.discard_export)
    review = PendingReview(PendingChanges(r.memory), choices, r.open_sessions)
    registry.register(with_pending(memory, review))  # with /memory pending|approve|reject
    forget = forget_command(
        r.memory, choices, r.open_sessions, r.person.discard_export, r.sessions.forget_words
    )
    registry.register(  # /forget, with /forget all and its button
        forget_with_erasure_command(
            forget,
            r.person,
            choices,
            erasures if erasures is not None else PendingErasures(),
            r.open_sessions,
            r.locales,
        )
    )
    registry.register(export_command(r.person))
    registry.register(skills_command(r.skills))
    registry.register(status_command(r.memory, r.sessions, r.model_name))
    if r.locales is not None and r.locales.settings is not None:
        registry.register(settings_command(r.locales, choices, r.notifications))
    registry.register(promote_command(r.skills))
    if access is not None:
        registry.register(allow_command(access))
    return registry


def new_command(open_sessions: SessionControl) -> Command:
    """/new: end the chat's session in `open_sessions`; the next message starts a fresh one."""

    async def new(ctx: CommandContext) -> CommandReply:
        await open_sessions.end(ctx.identity.session_key, "new")
        return CommandReply(ctx.locale._("Started a fresh session."))

    return Command(
        "new", N_("end this conversation and start a fresh one"), new, needs_session=True
    )  # after the reply being written, if one is: its end is part of the old session


def stop_command(open_sessions: SessionControl) -> Command:
    """/stop: cancel the reply being written in this chat; what was shown stays."""

    async def stop(ctx: CommandContext) -> CommandReply:
        if await open_sessions.stop(ctx.identity.session_key):
            return CommandReply(ctx.locale._("Stopped."))
        return CommandReply(ctx.locale._("Nothing is being written right now."))

    return Command("stop", N_("stop the reply being written"), stop)

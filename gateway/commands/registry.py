"""The command registry: what a chat command is, and how a message names one.

A command declares its name, a one-line description (for `/help` and the
platforms' command menus), its arguments and whether only admins may use it.
Its handler gets a `CommandContext` (the message, who sent it and where, its
arguments) and returns a `CommandReply`: data, not platform text, so each
adapter renders it its own way. What a command works on (stores, pending
choices, the open sessions as `SessionControl`) is bound when it is built.
Commands never reach the model and are never stored as conversation turns.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from gateway.messages import Choice, CommandArgument, CommandSpec, InboundMessage, MessageIdentity

if TYPE_CHECKING:
    from pathlib import Path

    from gateway.person_locale import PersonLocale

# "/name", "/name args" and Telegram's "/name@botname args".
ALIASES = {"帮助": "help", "幫助": "help", "ayuda": "help"}
"""Names people type for a command in the languages the bot ships, where the platforms'
menus can only hold the ASCII name; other non-ASCII words after a slash stay text."""
_NAME = "|".join(["[A-Za-z0-9_]{1,32}", *(re.escape(a) for a in ALIASES if not a.isascii())])
_COMMAND = re.compile(rf"^/({_NAME})(?:@(\S+))?(?:\s+(.*))?$", re.DOTALL)


@dataclass(frozen=True)
class CommandReply:
    """What a command answers: text, and optionally numbered choices."""

    text: str
    choices: tuple[Choice, ...] = ()
    document: Path | None = None
    """A file to send with the text (/export), where the sink sends files."""
    unattached_text: str | None = None
    """The text instead of `text` where the sink sends no files (the console, which runs
    on the operator's machine and may name the file's path)."""
    after_sent: Callable[[], object] | None = None
    """Called once the reply and its `document` were delivered (the file may go then)."""

    def as_text(self) -> str:
        """The reply for a platform without buttons: the choices as a numbered list."""
        if not self.choices:
            return self.text
        numbered = [f"{i}. {choice.label}" for i, choice in enumerate(self.choices, start=1)]
        return "\n".join([self.text, *numbered])


@dataclass(frozen=True)
class CommandContext:
    """What every command gets, made per message: the message, who sent it and where,
    the text after the command's name, and whether the sender is an admin."""

    message: InboundMessage
    identity: MessageIdentity
    """The sender's user key, the chat's session key and what that session may recall."""
    args: str
    is_admin: bool
    locale: PersonLocale
    """The sender's language, time zone and clock: every line and date of the reply."""


@dataclass(frozen=True)
class PendingChoice:
    """One offered option: who may pick it, for which command, and what it stands for."""

    owner: str
    command: str
    label: str
    value: str
    version: str
    expires: float


class SessionControl(Protocol):
    """What commands may do to the open sessions."""

    async def end(self, session_key: str, reason: str) -> None:
        """End the session of `session_key` (/new); the next message starts a new one."""

    async def drop_person(self, user_key: str) -> None:
        """Drop the person's open sessions (their providers drain and stop) before an erasure."""

    async def refresh_prompts(self, user_key: str) -> None:
        """Make the person's open sessions rebuild their system prompts from memory as it is."""

    async def stop(self, session_key: str) -> bool:
        """Cancel the reply `session_key` is writing now (/stop); whether there was one."""


CommandHandler = Callable[[CommandContext], Awaitable[CommandReply]]
ChoiceHandler = Callable[[CommandContext, PendingChoice], Awaitable[CommandReply]]
"""Applies a choice the command offered, once `PendingChoices` has checked who picked it."""


@dataclass(frozen=True)
class Command:
    """One chat command."""

    name: str
    description: str
    """One line, a catalog message (``N_``-marked): /help shows it in the person's language."""
    handler: CommandHandler
    arguments: tuple[CommandArgument, ...] = ()
    admin_only: bool = False
    needs_session: bool = False
    """Runs after the session's turn in progress (/new); other commands answer at once."""
    on_choice: ChoiceHandler | None = None

    @property
    def spec(self) -> CommandSpec:
        """What a platform's command menu shows of it."""
        return CommandSpec(self.name, self.description, self.arguments)


@dataclass(frozen=True)
class CommandCall:
    """A message read as a command: its lower-cased name and the text after it."""

    name: str
    args: str
    target: str | None = field(default=None, compare=False)  # "/name@target", as written


def parse_command(text: str) -> CommandCall | None:
    """The command a message names, or None when it is not a command."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name = match.group(1).lower()
    return CommandCall(ALIASES.get(name, name), (match.group(3) or "").strip(), match.group(2))


class CommandRegistry:
    """Commands by name, in the order they were registered."""

    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}

    def register(self, command: Command) -> None:
        """Add `command`; a second command of the same name is a programming error."""
        if command.name in self._commands:
            raise ValueError(f"command /{command.name} is already registered")
        self._commands[command.name] = command

    def get(self, name: str) -> Command | None:
        return self._commands.get(name)

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands.values())

    def help_lines(self, is_admin: bool, locale: PersonLocale) -> list[str]:
        """``/name — description`` for each command this person may use, each description
        in `locale`'s language (descriptions are catalog messages, marked where declared)."""
        return [
            f"/{command.name} — {locale._(command.description)}"
            for command in self
            if is_admin or not command.admin_only
        ]

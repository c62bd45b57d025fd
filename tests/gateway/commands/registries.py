"""The built-in commands over a test's services, bound as `gateway.app` binds them.

For tests that need the registry itself (its names, its /help lines, its menu)
rather than commands run through a `Conversations`.
"""

from __future__ import annotations

from gateway.app import Services, command_resources
from gateway.commands import CommandRegistry, builtin_commands
from gateway.commands.choices import PendingChoices
from gateway.messages import CommandSpec


class NoOpenSessions:
    """`SessionControl` of a bot with no session open: it records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    async def end(self, session_key: str, reason: str) -> None:
        self.calls.append(("end", session_key, reason))

    async def drop_person(self, user_key: str) -> None:
        self.calls.append(("drop_person", user_key))

    async def refresh_prompts(self, user_key: str) -> None:
        self.calls.append(("refresh_prompts", user_key))

    async def stop(self, session_key: str) -> bool:
        self.calls.append(("stop", session_key))
        return False


def builtin_registry(services: Services) -> CommandRegistry:
    """The built-in commands over `services`' stores and models."""
    return builtin_commands(command_resources(services, NoOpenSessions()), PendingChoices())


def builtin_menu(services: Services) -> list[CommandSpec]:
    """The command menu the service gives the adapters: everyone's commands, in order."""
    return [command.spec for command in builtin_registry(services) if not command.admin_only]

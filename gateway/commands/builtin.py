"""The built-in commands: /start, /help, /new, /recall, /memory, /forget, /export, /skills,
/status and (admins) /promote."""

from __future__ import annotations

from gateway.commands.erase import EXPORT, FORGET_WITH_ERASURE
from gateway.commands.info import HELP, SKILLS, START, STATUS
from gateway.commands.memory import MEMORY
from gateway.commands.recall import RECALL
from gateway.commands.registry import Command, CommandContext, CommandRegistry, CommandReply
from gateway.commands.skills import PROMOTE


async def _new(ctx: CommandContext) -> CommandReply:
    await ctx.end_session("new")
    return CommandReply("Started a fresh session.")


def builtin_commands() -> CommandRegistry:
    """A registry holding the built-in commands."""
    registry = CommandRegistry()
    registry.register(START)
    registry.register(HELP)
    registry.register(Command("new", "end this conversation and start a fresh one", _new))
    registry.register(RECALL)
    registry.register(MEMORY)
    registry.register(FORGET_WITH_ERASURE)  # /forget, with the /forget all button
    registry.register(EXPORT)
    registry.register(SKILLS)
    registry.register(STATUS)
    registry.register(PROMOTE)
    return registry

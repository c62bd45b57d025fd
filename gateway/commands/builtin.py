"""The built-in commands: /start, /help, /new, /recall, /memory, /skills, /status
and (admins) /promote."""

from __future__ import annotations

from gateway.commands.info import HELP, SKILLS, START, STATUS
from gateway.commands.recall import RECALL
from gateway.commands.registry import Command, CommandContext, CommandRegistry, CommandReply
from gateway.commands.skills import PROMOTE


async def _new(ctx: CommandContext) -> CommandReply:
    await ctx.end_session("new")
    return CommandReply("Started a fresh session.")


async def _memory(ctx: CommandContext) -> CommandReply:
    state = ctx.memory.read("user", ctx.message.user_key)
    if not state.entries:
        return CommandReply("I don't remember anything about you yet.")
    lines = [f"{i}. {entry}" for i, entry in enumerate(state.entries, start=1)]
    return CommandReply("What I remember about you:\n" + "\n".join(lines))


def builtin_commands() -> CommandRegistry:
    """A registry holding the built-in commands."""
    registry = CommandRegistry()
    registry.register(START)
    registry.register(HELP)
    registry.register(Command("new", "end this conversation and start a fresh one", _new))
    registry.register(RECALL)
    registry.register(Command("memory", "show what I remember about you", _memory))
    registry.register(SKILLS)
    registry.register(STATUS)
    registry.register(PROMOTE)
    return registry

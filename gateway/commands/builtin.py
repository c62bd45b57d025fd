"""The built-in commands: /start, /help, /new, /memory, /forget and (admins) /promote."""

from __future__ import annotations

from gateway.commands.memory import FORGET, MEMORY
from gateway.commands.registry import Command, CommandContext, CommandRegistry, CommandReply
from gateway.commands.skills import PROMOTE

INTRO = (
    "I'm Mnemo, a chat assistant that remembers you: what you tell me about yourself "
    "and our past conversations. Only you can see what I keep about you."
)


async def _help(ctx: CommandContext) -> CommandReply:
    lines = [INTRO, "", "Commands:", *ctx.registry.help_lines(ctx.is_admin)]
    return CommandReply("\n".join(lines))


async def _new(ctx: CommandContext) -> CommandReply:
    await ctx.end_session("new")
    return CommandReply("Started a fresh session.")


def builtin_commands() -> CommandRegistry:
    """A registry holding the built-in commands."""
    registry = CommandRegistry()
    registry.register(Command("start", "what I am and how to use me", _help))
    registry.register(Command("help", "this list of commands", _help))
    registry.register(Command("new", "end this conversation and start a fresh one", _new))
    registry.register(MEMORY)
    registry.register(FORGET)
    registry.register(PROMOTE)
    return registry

"""Chat commands, written once for every platform: a registry and the built-ins."""

from gateway.commands.builtin import builtin_commands
from gateway.commands.registry import (
    Choice,
    Command,
    CommandArgument,
    CommandCall,
    CommandContext,
    CommandHandler,
    CommandRegistry,
    CommandReply,
    parse_command,
)

__all__ = [
    "Choice",
    "Command",
    "CommandArgument",
    "CommandCall",
    "CommandContext",
    "CommandHandler",
    "CommandRegistry",
    "CommandReply",
    "builtin_commands",
    "parse_command",
]

"""Chat commands, written once for every platform: a registry and the built-ins."""

from gateway.commands.builtin import builtin_commands
from gateway.commands.registry import (
    Command,
    CommandCall,
    CommandContext,
    CommandHandler,
    CommandRegistry,
    CommandReply,
    parse_command,
)

__all__ = [
    "Command",
    "CommandCall",
    "CommandContext",
    "CommandHandler",
    "CommandRegistry",
    "CommandReply",
    "builtin_commands",
    "parse_command",
]

"""Chat commands, written once for every platform: a registry and the built-ins."""

from gateway.commands.builtin import CommandResources, builtin_commands
from gateway.commands.registry import (
    Command,
    CommandCall,
    CommandContext,
    CommandHandler,
    CommandRegistry,
    CommandReply,
    SessionControl,
    parse_command,
)

__all__ = [
    "Command",
    "CommandCall",
    "CommandContext",
    "CommandHandler",
    "CommandRegistry",
    "CommandReply",
    "CommandResources",
    "SessionControl",
    "builtin_commands",
    "parse_command",
]

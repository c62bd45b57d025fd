"""The command registry and the parsing of a message into a command."""

from __future__ import annotations

from datetime import UTC

import pytest

from gateway.app import Services
from gateway.commands import (
    Command,
    CommandCall,
    CommandContext,
    CommandRegistry,
    CommandReply,
    parse_command,
)
from gateway.i18n import Catalogs
from gateway.messages import Choice
from gateway.person_locale import PersonLocale
from tests.gateway.commands.registries import builtin_registry


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/new", CommandCall("new", "")),
        ("/NEW", CommandCall("new", "")),
        ("/recall  last week's deploy ", CommandCall("recall", "last week's deploy")),
        ("/new@mnemo_bot", CommandCall("new", "")),
        ("/forget@mnemo_bot all", CommandCall("forget", "all")),
        ("  /help", CommandCall("help", "")),
        ("/recall line one\nline two", CommandCall("recall", "line one\nline two")),
    ],
)
def test_commands_are_parsed(text: str, expected: CommandCall) -> None:
    assert parse_command(text) == expected


@pytest.mark.parametrize("text", ["hello /new", "", "/", "//new", "/ new", "/naïve", "a/b"])
def test_other_text_is_not_a_command(text: str) -> None:
    assert parse_command(text) is None


async def _noop(ctx: CommandContext) -> CommandReply:
    return CommandReply("ok")


def test_a_name_is_registered_once() -> None:
    registry = CommandRegistry()
    registry.register(Command("ping", "answers", _noop))
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Command("ping", "again", _noop))


def test_help_lines_hide_admin_commands_from_others() -> None:
    registry = CommandRegistry()
    registry.register(Command("ping", "answers", _noop))
    registry.register(Command("promote", "share a skill", _noop, admin_only=True))
    english = PersonLocale(Catalogs().translator("en"), UTC)
    assert registry.help_lines(False, english) == ["/ping — answers"]
    assert registry.help_lines(True, english) == ["/ping — answers", "/promote — share a skill"]


async def test_builtins_are_registered_in_order(services: Services) -> None:
    names = [c.name for c in builtin_registry(services)]
    assert names == [
        "start", "help", "new", "stop", "recall", "memory", "forget", "export", "skills", "status",
        "settings", "promote",
    ]  # fmt: skip
    admin_only = [c.name for c in builtin_registry(services) if c.admin_only]
    assert admin_only == ["promote"]  # hidden from everyone else's /help, refused for them
    waiting = [c.name for c in builtin_registry(services) if c.needs_session]
    assert waiting == ["new", "memory", "forget"]  # the others answer while a reply is written


def test_choices_render_as_numbered_text() -> None:
    reply = CommandReply("Forget which?", (Choice("tea", "f:1"), Choice("coffee", "f:2")))
    assert reply.as_text() == "Forget which?\n1. tea\n2. coffee"
    assert CommandReply("plain").as_text() == "plain"

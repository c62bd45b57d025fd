"""Shared plumbing for CLI commands: lazy configuration, clean failures, safe output.

Stored text (memory entries, messages, skills) may hold anything a person, the
model or a hand edit put there. Every command prints it through `visible()`,
or `json_text()` for ``--json``, so that escape sequences and bidi overrides
are shown rather than acted on by the operator's terminal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

if TYPE_CHECKING:  # the configuration and the stores load when a command runs
    from gateway.config import Config

T = TypeVar("T")

EXIT_FAILURE = 1
EXIT_CONFIG = 2
EXIT_USAGE = 2

# What a terminal acts on instead of showing: C0 controls, DEL and C1 controls
# (ESC, CSI …), the bidi marks, embeddings, overrides and isolates that reorder
# the text after them, the line and paragraph separators, and lone surrogates
# (which cannot even be encoded). Zero-width joiners stay: emoji need them.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\u2028\u2029\ud800-\udfff]")
# json.dumps already escapes C0 controls; raw ones in its output are layout.
_UNSAFE_IN_JSON = re.compile(f"[\x7f-\x9f{_BIDI}\u2028\u2029\ud800-\udfff]")


def visible(text: str, keep: str = "") -> str:
    """`text` with every control character written as an escape (ESC as ``\\x1b``).

    Characters in `keep` (``"\\n\\t"`` for multi-line text) pass unchanged;
    printable text of any script, emoji included, is untouched.
    """
    return _UNSAFE.sub(lambda m: m[0] if m[0] in keep else _escape(m[0]), text)


def json_visible(text: str) -> str:
    """JSON text with the characters `json.dumps` leaves raw written as ``\\uXXXX``.

    The result parses to the same value: only string contents can hold them.
    """
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def json_text(payload: object, indent: int | None = None) -> str:
    """`payload` as JSON, readable (non-ASCII kept) and safe to print."""
    return json_visible(json.dumps(payload, ensure_ascii=False, indent=indent))


def _escape(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii")


@dataclass
class CliState:
    """What the top-level group hands to its commands."""

    config_path: Path | None
    _config: Config | None = field(default=None, repr=False)

    def config(self) -> Config:
        if self._config is None:
            from gateway.config import load_config

            self._config = load_config(self.config_path)
        return self._config


def fail(message: str, code: int = EXIT_FAILURE) -> None:
    """Print one line on stderr (controls made visible, a URL's credentials taken out:
    a database error may quote its URL) and exit with `code`."""
    from gateway.urls import redact_url_credentials

    click.echo(f"mnemo: {visible(redact_url_credentials(message))}", err=True)
    raise SystemExit(code)


def user_key_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: a well-formed user key, else one line and exit 2."""
    if value is None:
        return None
    from memory_core import InvalidUserKeyError, check_user_key

    try:
        return check_user_key(value)
    except InvalidUserKeyError as exc:
        fail(str(exc), EXIT_USAGE)
    raise AssertionError("unreachable")


def run_command(body: Callable[[], T]) -> T:
    """Run a command body, turning our own errors into one line and an exit code."""
    from gateway.errors import ConfigError, GatewayError
    from memory_core import MemoryCoreError

    try:
        return body()
    except ConfigError as exc:
        fail(str(exc), EXIT_CONFIG)
    except (GatewayError, MemoryCoreError) as exc:
        fail(str(exc))
    raise AssertionError("unreachable")

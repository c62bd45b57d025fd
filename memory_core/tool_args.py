"""Decoding a tool call's arguments: the one way, used by memory_core's tools and the agent."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def decode_arguments(
    arguments: Mapping[str, Any] | str, error: type[Exception]
) -> Mapping[str, Any]:
    """The arguments as a mapping: JSON text is parsed, blank text is ``{}``.

    Anything that is not a JSON object raises `error`, the calling tool's own
    argument error, so each tool reports it in its own terms.
    """
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise error(f"arguments are not valid JSON: {exc.msg}") from None
    if not isinstance(arguments, Mapping):
        raise error("arguments must be a JSON object")
    return arguments

"""Reading the configuration file: bounded UTF-8, YAML without aliases, one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gateway.errors import ConfigError

MAX_CONFIG_BYTES = 1 << 20
MAX_NESTING = 32  # mappings and lists inside each other; the schema needs 3
MAX_NODES = 5000  # keys and values in the file; the schema has about 40
SHOWN_CHARS = 60  # longest value or key an error message repeats


def capped(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` on one printable line, cut to `limit` characters."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: limit + 1])
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _ConfigLoader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases, with bounded nesting and size.

    A configuration file has no use for anchors and aliases; refusing them is
    the plain defence against an alias bomb, whose expansion costs minutes and
    gigabytes. The nesting bound keeps PyYAML's recursive composer far from
    Python's recursion limit; the node bound stops a dense file within a
    second instead of the ~40 s PyYAML takes for 1 MiB of ``[1,1,1,…]``.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            raise self._refusal("aliases (*name) are not allowed")
        self._depth += 1
        self._nodes += 1
        try:
            if self._depth > MAX_NESTING:
                raise self._refusal(f"nesting deeper than {MAX_NESTING} levels")
            if self._nodes > MAX_NODES:
                raise self._refusal(f"more than {MAX_NODES} keys and values")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _refusal(self, problem: str) -> yaml.MarkedYAMLError:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        return yaml.composer.ComposerError(None, None, problem, event.start_mark)


def _read_text(path: Path) -> str:
    """The file's text: at most `MAX_CONFIG_BYTES` of UTF-8."""
    try:
        with Path(path).open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {path} is larger than {MAX_CONFIG_BYTES >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8: "
            f"invalid byte 0x{data[exc.start]:02x} at offset {exc.start}"
        ) from None


def read_yaml(path: Path | None, default: Path) -> dict[str, Any]:
    """The file's top-level mapping (`default` when `path` is None and it exists, else {});
    anything unreadable or malformed is one `ConfigError` line."""
    if path is None:
        if not default.exists():
            return {}
        path = default
    text = _read_text(path)
    try:
        data = yaml.load(text, Loader=_ConfigLoader)  # a SafeLoader subclass
    except yaml.reader.ReaderError as exc:
        raise ConfigError(
            f"config file {path}: character U+{exc.character:04X} "
            f"at offset {exc.position} is not allowed"
        ) from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of 10,000 digits
        raise ConfigError(f"config file {path}: cannot read a value ({capped(str(exc))})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"config file {path}{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of sections")
    return data

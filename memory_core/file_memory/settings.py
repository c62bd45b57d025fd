"""A person's own settings (language, time zone, background-notice mode), beside USER.md.

They are the person's data: kept as their record ``settings.json`` (on files,
that file in their folder), so they are erased with USER.md and refused, like
any write about the person, once they are erased (`MemoryBackend.person_record`).
A missing record means no setting; an unreadable one is logged and read as
none (the person sets them again, nothing else is lost). What a value may be (a shipped language, a
known zone) is the application's to check; the store keeps short strings.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

from memory_core.errors import InvalidArgumentsError, MemoryFileError
from memory_core.file_memory.backend import MemoryBackend

log = logging.getLogger(__name__)

SETTINGS_FILE = "settings.json"
MAX_VALUE_CHARS = 64
NoticeMode = Literal["off", "on", "verbose"]
NOTICE_MODES: tuple[NoticeMode, ...] = ("off", "on", "verbose")


@dataclass(frozen=True)
class PersonSettings:
    """What the person chose; None: not chosen (the platform's hint or the config decides)."""

    language: str | None = None
    timezone: str | None = None
    notices: NoticeMode | None = None

    def as_json(self) -> dict[str, str]:
        """The chosen settings only."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @property
    def empty(self) -> bool:
        return not self.as_json()


_NAMES = frozenset(f.name for f in fields(PersonSettings))


class PersonSettingsStore:
    """Every person's settings, a record of theirs in `memory`."""

    def __init__(self, memory: MemoryBackend) -> None:
        self._memory = memory

    def read(self, user_key: str) -> PersonSettings:
        """`user_key`'s settings (none chosen when there is no record)."""
        return self._parse(lambda: self._memory.peek_record(user_key, SETTINGS_FILE), user_key)

    def update(self, user_key: str, **changes: str | None) -> PersonSettings:
        """Set (a string) or clear (None) the named settings; the settings now.

        Raises `InvalidArgumentsError` for an unknown name or a value that is not a short
        string, and `PersonErasedError` when the person was erased since this work began.
        """
        unknown = set(changes) - _NAMES
        if unknown:
            raise InvalidArgumentsError(f"unknown settings: {', '.join(sorted(unknown))}")
        for name, value in changes.items():
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InvalidArgumentsError(f"setting {name} must be a non-empty string")
            if value is not None and len(value) > MAX_VALUE_CHARS:
                raise InvalidArgumentsError(f"setting {name} is over {MAX_VALUE_CHARS} characters")
            if name == "notices" and value is not None and value not in NOTICE_MODES:
                raise InvalidArgumentsError(f"notices must be one of {', '.join(NOTICE_MODES)}")
        with self._memory.person_record(user_key, SETTINGS_FILE) as record:
            current = self._parse(record.read, user_key)
            updated = replace(current, **changes)  # type: ignore[arg-type]
            if updated.empty:
                record.delete()
            else:
                record.write(json.dumps(updated.as_json(), ensure_ascii=False, indent=1) + "\n")
        return updated

    def _parse(self, read: Callable[[], str | None], user_key: str) -> PersonSettings:
        try:
            text = read()
            return PersonSettings() if text is None else _parsed(json.loads(text))
        except (MemoryFileError, ValueError) as exc:
            log.warning(
                "%s of %s is unreadable and counts as no settings: %s", SETTINGS_FILE, user_key, exc
            )
            return PersonSettings()


def _parsed(raw: object) -> PersonSettings:
    if not isinstance(raw, dict):
        return PersonSettings()
    values: dict[str, Any] = {
        name: value
        for name, value in raw.items()
        if name in _NAMES and isinstance(value, str) and 0 < len(value) <= MAX_VALUE_CHARS
    }
    if values.get("notices") not in (None, *NOTICE_MODES):
        values.pop("notices")
    return PersonSettings(**values)

"""A person's own settings (language, time zone, background-notice mode), beside USER.md.

They are the person's data: kept in ``settings.json`` in their folder, so
they are erased with it and refused, like any write about the person, once
they are erased (`FileMemoryStore.beside_user`). A missing file means no
setting; an unreadable one is logged and read as none (the person sets them
again, nothing else is lost). What a value may be (a shipped language, a
known zone) is the application's to check; the store keeps short strings.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

from memory_core.atomic import atomic_write_text
from memory_core.errors import InvalidArgumentsError
from memory_core.file_memory.store import FileMemoryStore

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
    """Every person's settings, in their USER.md folder of `memory`."""

    def __init__(self, memory: FileMemoryStore) -> None:
        self._memory = memory

    def read(self, user_key: str) -> PersonSettings:
        """`user_key`'s settings (none chosen when there is no file)."""
        path = self._memory.path("user", user_key).with_name(SETTINGS_FILE)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return PersonSettings()
        except (OSError, ValueError) as exc:
            log.warning("%s is unreadable and counts as no settings: %s", path, exc)
            return PersonSettings()
        return _parsed(raw)

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
        with self._memory.beside_user(user_key) as folder:
            path = folder / SETTINGS_FILE
            current = self.read(user_key)
            updated = replace(current, **changes)  # type: ignore[arg-type]
            if updated.empty:
                path.unlink(missing_ok=True)
            else:
                body = json.dumps(updated.as_json(), ensure_ascii=False, indent=1) + "\n"
                atomic_write_text(path, body, mode=0o600)
        return updated


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

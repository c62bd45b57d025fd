"""Small builders shared by the session-store tests."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import NewMessage, SessionOrigin

_keys = itertools.count(1)


def origin(
    user: str = "telegram-1",
    chat: str | None = None,
    *,
    chat_type: str = "private",
    source: str = "telegram",
    key: str | None = None,
) -> SessionOrigin:
    chat = chat or user
    return SessionOrigin(
        session_key=key or f"{source}:{chat_type}:{chat}:{user}",
        source=source,
        user_key=user,
        chat_id=chat,
        chat_type=chat_type,
    )


def message(content: str, ts: float = 1000.0, role: str = "user", **extra: object) -> NewMessage:
    if "platform_message_id" not in extra and "key" not in extra:
        extra["key"] = f"k{next(_keys)}"
    return NewMessage(role=role, content=content, timestamp=ts, **extra)  # type: ignore[arg-type]


def open_db(tmp_path: Path) -> SessionDB:
    return SessionDB(tmp_path / "state.db").open()


def say(db: SessionDB, text: str, *, ts: float = 1000.0, end: bool = True, **where: object) -> int:
    """Write one message in a fresh session of `where` and (by default) end it; return its id."""
    result = db.append_message(origin=origin(**where), message=message(text, ts))  # type: ignore[arg-type]
    if end:
        db.end_session(result.session_id, "test")
    return result.session_id


def kiwi_session(
    person: str, name: str, chat: str, chat_type: str, start: int, count: int
) -> list[str]:
    """`count` import lines of one session of `person`'s, each saying "kiwi jam", a
    minute apart from `start`, the person and the bot in turn."""
    lines = []
    for n in range(count):
        record = {"session": name, "user": person, "platform": "telegram", "chat": chat,
                  "chat_type": chat_type, "role": "user" if n % 2 == 0 else "assistant",
                  "content": f"kiwi jam {n} of {name}", "timestamp": start + n * 60}  # fmt: skip
        lines.append(json.dumps(record))
    return lines

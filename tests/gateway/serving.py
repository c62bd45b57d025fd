"""Conversations for tests, built in one call by the composition root, and what a
test reads back of one person: their private messages and their stored rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gateway.access import AccessPolicy
from gateway.app import Services, build_conversations
from gateway.commands.erase import PendingErasures
from gateway.config import Config, load_config
from gateway.conversation import Conversations
from gateway.jobs import BackgroundWork
from gateway.messages import InboundMessage

SKILLS = Path(__file__).resolve().parents[2] / "skills"


def config_for(
    model_url: str,
    data: Path,
    recap_timeout: float | None = None,
    file_text: str | None = None,
) -> Config:
    """The bot's configuration for a test: the fake model at `model_url`, data in `data`,
    the bundled skills; `recap_timeout` shortens the auxiliary model's recap wait, and
    `file_text` is a config file's YAML (written beside `data` as ``mnemo.yaml``)."""
    env = {
        "OPENAI_BASE_URL": model_url + "/v1",
        "MNEMO_HOME": str(data),
        "MNEMO_SKILLS_DIR": str(SKILLS),
    }
    path = None
    if file_text is not None:
        path = data.parent / "mnemo.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(file_text)
    config = load_config(path, environ=env)
    if recap_timeout is None:
        return config
    auxiliary = config.auxiliary.model_copy(update={"recap_timeout": recap_timeout})
    return config.model_copy(update={"auxiliary": auxiliary})


def serving(
    services: Services,
    access: AccessPolicy | None = None,
    background: BackgroundWork | None = None,
    erasures: PendingErasures | None = None,
) -> Conversations:
    """`build_conversations` over `services`; `access` by default serves everyone, with the
    configuration's admins (the tests' explicit "everyone" policy)."""
    if access is None:
        access = AccessPolicy.everyone(services.config.admins)
    return build_conversations(services, access, background=background, erasures=erasures)


def private(text: str, user: str, message_id: str | None = None) -> InboundMessage:
    """`text` from Telegram user `user` in their private chat with the bot."""
    return InboundMessage(
        platform="telegram",
        chat_id=user,
        chat_type="private",
        user_id=user,
        text=text,
        message_id=message_id,
        user_name=f"User {user}",
    )


def stored_rows(services: Services, user: str) -> list[tuple[object, ...]]:
    """(role, content) of every message stored for Telegram user `user`, in order."""
    with sqlite3.connect(services.config.home / "state.db") as conn:
        return conn.execute(
            "SELECT m.role, m.content FROM messages m JOIN sessions s ON s.id = m.session_id "
            "WHERE s.user_key = ? ORDER BY m.id",
            (f"telegram-{user}",),
        ).fetchall()

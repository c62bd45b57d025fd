"""Conversations for tests, built in one call by the composition root, and what a
test reads back of one person: their private messages and their stored rows."""

from __future__ import annotations

import sqlite3

from gateway.access import AccessPolicy
from gateway.app import Services, build_conversations
from gateway.commands.erase import PendingErasures
from gateway.conversation import Conversations
from gateway.jobs import BackgroundWork
from gateway.messages import InboundMessage


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

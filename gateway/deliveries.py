"""A command or a button press delivered twice runs once.

A platform may deliver one update twice: the same Telegram update POSTed to two
replicas on one database, or fetched again after a restart. A person's message
is stored once by its platform id, so it is answered once; but a command is
never stored (``/new`` twice would start two sessions) and a press is a
single-use choice (the second would be refused in a visible line). So before
either runs, the session store records its delivery (`first_delivery`, as a
digest) and only the first runs; a later one does nothing visible and is logged.

A command is known by its chat, thread and message ids; a press by the platform's
id of that press (Telegram's callback query id, `InboundMessage.press_id`), else
by the chat and message the button is on, who pressed it, and its payload (a
Discord press has an interaction id of its own as its message id). A second
press of a spent button is a new press: it gets its "not valid any more" line.
A message without an id (the console) is never taken for a duplicate.

The store unavailable (`PostgresUnavailableError`) propagates: the command is
then not confirmed to its platform, which sends it again. A SQLite store too busy
to answer in time lets it run: one process serves state.db, so the command can
only be a redelivery after a restart, and running it again beats losing it.
"""

from __future__ import annotations

import json
import logging
from typing import Protocol

from gateway.messages import InboundMessage
from memory_core import SessionStoreBusyError

log = logging.getLogger(__name__)


class DeliveryLog(Protocol):
    """Where deliveries are recorded (`SessionBackend` is one)."""

    async def first_delivery(self, platform: str, delivery: str) -> bool: ...


class Deliveries:
    """Whether a command's or a press's delivery is its first (`log` None: always)."""

    def __init__(self, log: DeliveryLog | None) -> None:
        self._log = log

    async def first_command(self, message: InboundMessage) -> bool:
        """Whether the command `message` arrives for the first time."""
        key = ["command", message.chat_id, message.thread_id, message.message_id]
        return await self._first(message, key, "command")

    async def first_press(self, message: InboundMessage, payload: str) -> bool:
        """Whether the press of `payload` (`message`: who pressed it, on which message)
        arrives for the first time."""
        key = ["press", message.chat_id, message.message_id, message.user_id, payload]
        if message.press_id is not None:
            key = ["press", message.chat_id, message.press_id]
        return await self._first(message, key, "button press")

    async def _first(self, message: InboundMessage, key: list[str | None], what: str) -> bool:
        if self._log is None or message.message_id is None:
            return True
        try:
            first = await self._log.first_delivery(message.platform, json.dumps(key))
        except SessionStoreBusyError as exc:
            log.warning("%s %s not checked for a duplicate (%s); run", message.platform, what, exc)
            return True
        if not first:
            log.info(
                "%s %s in session %s delivered again: not run again",
                message.platform,
                what,
                message.session_key(),
            )
        return first

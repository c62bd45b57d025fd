"""A cached session's history as its requests carry it, kept in step with the store.

Rebuilding the history from state.db on every turn (read every message,
`as_sent` each, cut the long ones, estimate each one's size) costs time that
grows with the session: about 20 ms a turn at turn 1,000. A `SentHistory` holds
that result for one cached session and grows by the messages each turn stores,
so a turn pays only for its own messages. Its items are exactly what the
rebuild gives (`as_sent` of the stored form, cut by `clip_history` to the
message cap), in the store's order (by time, then id), so the request bytes
are the same either way; each is an `EncodedMessage`, encoded as JSON once
when it is added, which every later request body reuses.

It is right only while every message of its session is written by the one
holding it (a data directory is served by one process: `mnemo.lock`), and only
for writes it saw succeed. The caller takes it out of the cache for the time
of a write and puts it back once the write is stored and added here; a write
that failed or was queued, a message the store already had, or a timestamp
that would not sort last (the clock went back) leaves it out, and the next
turn reads the store again.

It also keeps, as messages are added, the person's own words of each of their
messages that holds a link (`linked_earlier`): a turn tells its reply which
links the person sent in this session from those alone, not by reading every
message of the session again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.agent.compression import SUMMARY_PREFIX, clip_history, message_chars
from gateway.agent.transcript import as_sent
from gateway.agent.wire import EncodedMessage
from gateway.delivery.links import links_in
from gateway.media.markers import without_image_lines
from memory_core import AppendResult, NewMessage, StoredMessage


class SentHistory:
    """One session's stored messages as a request carries them, with their estimated size."""

    def __init__(self, session_id: int, cap: int) -> None:
        self.session_id = session_id
        self._cap = cap
        self._items: list[dict[str, Any]] = []
        self._sizes: list[int] = []
        self._chars = 0
        self._bytes = 0  # of the items' encoded JSON
        self._last_id: int | None = None
        self._max_id: int | None = None  # the highest message id held
        self._last_order: tuple[float, int] | None = None  # the store's order: (time, id)
        self._linked: list[tuple[int, str]] = []  # (item index, own words) holding a link

    @classmethod
    def of(cls, session_id: int, stored: Sequence[StoredMessage], cap: int) -> SentHistory:
        """The history of `stored`, a whole session as the store returns it (in order)."""
        history = cls(session_id, cap)
        if not history.extend(stored):
            raise ValueError("stored messages out of the store's order")
        return history

    @property
    def encoded_bytes(self) -> int:
        """The size of the messages' encoded JSON: about a third of the memory they take."""
        return self._bytes

    @property
    def last_id(self) -> int | None:
        """The id of the last message held (None: none)."""
        return self._last_id

    @property
    def max_id(self) -> int | None:
        """The highest message id held (None: none): the session's newest in the store,
        since a history holds every message of its session."""
        return self._max_id

    def earlier(self) -> tuple[list[dict[str, Any]], int]:
        """The messages before the last one (this turn's), and their estimated size."""
        if not self._items:
            return [], 0
        return self._items[:-1], self._chars - self._sizes[-1]

    def extend(self, stored: Sequence[StoredMessage]) -> bool:
        """Add messages just stored, in order; False (nothing added past the first that
        fails) when one would not sort after the last held: the caller drops the history."""
        for message in stored:
            order = (message.timestamp, message.id)
            if self._last_order is not None and order <= self._last_order:
                return False
            item = EncodedMessage(clip_history([as_sent(message)], self._cap)[0])
            size = message_chars(item)
            self._items.append(item)
            self._sizes.append(size)
            self._chars += size
            self._bytes += len(item.json)
            self._last_id = message.id
            self._max_id = message.id if self._max_id is None else max(self._max_id, message.id)
            self._last_order = order
            self._note_links(len(self._items) - 1, item)
        return True

    def _note_links(self, index: int, item: dict[str, Any]) -> None:
        """Keep the person's own words of item `index` when they hold a link (a picture's
        description is the auxiliary model's, a compression summary the model's)."""
        content = item.get("content")
        if item.get("role") != "user" or not isinstance(content, str):
            return
        if content.startswith(SUMMARY_PREFIX):
            return
        own = without_image_lines(content)
        if links_in(own):
            self._linked.append((index, own))

    def linked_earlier(self) -> list[str]:
        """The person's own words of each of their messages before the last one (this
        turn's) that holds a link: the links they sent in this session, read from these
        alone (a message without a link adds none), whatever the session's length."""
        last = len(self._items) - 1
        return [own for index, own in self._linked if index < last]

    def add_written(self, written: Sequence[NewMessage], result: AppendResult) -> bool:
        """Add the messages of one successful `append_messages` call; False when the store
        did not take them all as new messages of this session (the caller drops it)."""
        if result.session_id != self.session_id or result.inserted != len(written):
            return False
        return self.extend(
            [
                stored_form(message, message_id, result.session_id)
                for message, message_id in zip(written, result.message_ids, strict=True)
            ]
        )


def stored_form(message: NewMessage, message_id: int, session_id: int) -> StoredMessage:
    """`message` as the store returns it once written with `message_id`."""
    return StoredMessage(
        id=message_id,
        session_id=session_id,
        role=message.role,
        content=message.content,
        timestamp=float(message.timestamp),
        tool_name=message.tool_name,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
        platform_message_id=message.platform_message_id,
        speaker_name=message.speaker_name,
        own_words=message.own_words,
    )

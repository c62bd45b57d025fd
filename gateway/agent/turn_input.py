"""A turn's first step: the person's message, read and stored before the model is asked.

`Intake.read` reads a message's media (`gateway.media`: a voice note's
transcript, a picture's description; a `MediaError` is one line to the person
and nothing is stored), marks a forward and replaces each lone surrogate
(which UTF-8 cannot hold) with U+FFFD, so what the model is sent is what the
store keeps. `Intake.write` then stores it (so nothing is lost on an error) and
tells the platform (`stored`). A picture goes to the model as an image part in
its own turn only: the message is stored as its text (with the picture's
"[image: …]" line), and that is what every later turn sends.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from gateway.errors import MediaError
from gateway.i18n import N_
from gateway.media import ReadMedia
from gateway.messages import InboundMessage, MessageIdentity, ReplySink, stored_text
from gateway.person_locale import PersonLocale
from memory_core import AppendResult, NewMessage, SessionBackend, SessionOrigin

log = logging.getLogger(__name__)

# A message with media when no reader was given (the router's line for what it cannot read).
NO_MEDIA_LINE = N_("I can only read text for now.")

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class MediaReading(Protocol):
    """What reads a message's media for its turn (`gateway.media.MediaReader`)."""

    async def read(self, message: InboundMessage) -> ReadMedia: ...


@dataclass(frozen=True)
class Read:
    """The person's message as the turn stores and sends it, and its pictures."""

    message: InboundMessage
    images: tuple[str, ...] = ()


@dataclass(frozen=True)
class Asked:
    """The person's message, stored: as written (`new`), where it went (`first`: its
    session, `session_id`, and its id there, `message_id`)."""

    message: InboundMessage
    images: tuple[str, ...]
    turn_id: str
    origin: SessionOrigin
    new: NewMessage
    first: AppendResult
    session_id: int
    message_id: int


class Intake:
    """Reads and stores the person's message of a turn."""

    def __init__(self, store: SessionBackend, model: str, media: MediaReading | None) -> None:
        """`model`: the model's name, kept with a new session; `media`: reads voice notes
        and pictures (None: such a message gets one line, nothing is stored)."""
        self._store = store
        self._model = model
        self._media = media

    async def read(
        self,
        message: InboundMessage,
        sink: ReplySink,
        stored: Callable[[], None],
        locale: PersonLocale | None,
    ) -> Read | None:
        """`message` as the turn stores it; None when its media could not be read (the
        person has their line, and `stored` was called: nothing of it needs keeping)."""
        images: tuple[str, ...] = ()
        if message.media:
            media = await self._read_media(message, sink, locale)
            if media is None:
                stored()  # the person has their line: the platform need not send it again
                return None
            message, images = replace(message, text=media.text), media.images
        return Read(_encodable(replace(message, text=stored_text(message))), images)

    async def write(self, who: MessageIdentity, read: Read, stored: Callable[[], None]) -> Asked:
        """Store the person's message, then call `stored`."""
        message, turn_id = read.message, uuid.uuid4().hex
        new = NewMessage(
            role="user",
            content=message.text,
            timestamp=time.time(),
            platform_message_id=message.message_id,
            key=f"{turn_id}:0",
            speaker_name=message.user_name,
            own_words=message.own_words,
        )
        origin = self.origin(who)
        first = await self._store.append_messages(origin=origin, messages=[new])
        stored()
        return Asked(
            message,
            read.images,
            turn_id,
            origin,
            new,
            first,
            first.session_id,
            first.message_ids[0],
        )

    def origin(self, who: MessageIdentity) -> SessionOrigin:
        """Where `who`'s messages go: their session, started with this model if new."""
        return SessionOrigin(
            session_key=who.session_key,
            source=who.platform,
            user_key=who.user_key,
            chat_id=who.chat_id,
            chat_type=who.chat_type,
            thread_id=who.thread_id,
            model=self._model,
        )

    async def _read_media(
        self, message: InboundMessage, sink: ReplySink, locale: PersonLocale | None
    ) -> ReadMedia | None:
        """What `message`'s media says (None: it could not be read, and the person was told
        why in one line)."""
        try:
            if self._media is None:
                raise MediaError(NO_MEDIA_LINE, "no media reader")
            return await self._media.read(message)
        except MediaError as exc:
            log.info("media of a message could not be read: %s: %s", type(exc).__name__, exc)
            english = exc.message_id.format(**exc.values) if exc.values else exc.message_id
            await sink.write(english if locale is None else exc.line(locale))
            return None


def _encodable(message: InboundMessage) -> InboundMessage:
    """`message` with each lone surrogate in its text and sender's name replaced by U+FFFD
    (the store does the same for any writer; here the model's request gets it too)."""
    text = _LONE_SURROGATE.sub("\ufffd", message.text)
    name = message.user_name
    if name is not None:
        name = _LONE_SURROGATE.sub("\ufffd", name)
    if text == message.text and name == message.user_name:
        return message
    return replace(message, text=text, user_name=name)

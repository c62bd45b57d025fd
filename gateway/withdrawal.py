"""Edits and deletions withdraw support: a person's edited message is stored as its new
text, and what only its old text grounded in their memory is withdrawn.

`Withdrawal.edited` takes a `MessageEdit` from an adapter (Telegram's
``edited_message``; Discord's message edit and delete events). The session store
replaces the message's text (a deleted one keeps its place, empty), so the old words
stop counting for the model's history, recall and every later grounding check. Then
each entry of the person's USER.md whose evidence names that message is checked again
against the person's own words in that message's session as they now read: one that is
no longer grounded is removed as a change of origin "withdrawn" (kept in the history,
undoable like any change), and the person's open sessions are read anew (history and
prompt; their background work goes on).
An edit of a message the store never kept (a command, a refused stranger's, one
that raced its own storing) changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from gateway.jobs.grounding import own_words
from gateway.media.markers import IMAGE_PREFIX, NOT_SHOWN_MARK, VOICE_PREFIX
from gateway.messages import MessageEdit
from memory_core import (
    MemoryBackend,
    NoMatchError,
    Operation,
    Origin,
    OwnWords,
    PendingChanges,
    PersonErasedError,
    SessionBackend,
    check,
)
from memory_core.file_memory import entry_handle

log = logging.getLogger(__name__)

Words = Callable[[], Awaitable[OwnWords | None]]
"""The person's words in the edited message's session, read when first needed."""


class Reload(Protocol):
    """The open sessions (`OpenSessions`): read a person's sessions anew after a change."""

    async def reload(self, user_key: str) -> None: ...


class Withdrawal:
    """Applies people's edits to the store and to what their memory holds because of them."""

    def __init__(
        self, sessions: SessionBackend, memory: MemoryBackend, open_sessions: Reload
    ) -> None:
        self._sessions = sessions
        self._memory = memory
        self._open = open_sessions

    async def edited(self, edit: MessageEdit) -> tuple[str, ...]:
        """Apply `edit`; the entries withdrawn because of it. The top of an adapter's task:
        an error is logged and changes nothing more."""
        try:
            return await self._apply(edit)
        except Exception:
            log.exception("an edit of a %s message could not be applied", edit.platform)
            return ()

    async def _apply(self, edit: MessageEdit) -> tuple[str, ...]:
        changed = await self._sessions.edit_message(
            platform=edit.platform,
            chat_id=edit.chat_id,
            platform_message_id=edit.message_id,
            user_key=edit.user_key,
            text=edit.text,
        )
        if changed is None or changed.user_key is None or changed.old_text == changed.text:
            return ()
        key = changed.user_key
        kept = media_lines(changed.old_text)
        if kept and edit.text is not None:  # a caption edited: what was heard or shown stays
            text = "\n".join([edit.text, *kept]) if edit.text else "\n".join(kept)
            await self._sessions.edit_message(
                platform=edit.platform,
                chat_id=edit.chat_id,
                platform_message_id=edit.message_id,
                user_key=key,
                text=text,
            )
        ids, words = set(changed.message_ids), self._words(changed.session_id)
        withdrawn = await self._withdraw(key, changed.session_id, ids, words)
        await self._unstage(key, ids, words)
        await self._open.reload(key)  # no cached history or prompt keeps the old text
        return withdrawn

    async def _withdraw(
        self, key: str, session_id: int, message_ids: set[int], words: Words
    ) -> tuple[str, ...]:
        """Remove the entries whose evidence names `message_ids` and that the person's
        words in `session_id` (`words`) no longer ground."""
        origins = await asyncio.to_thread(self._memory.origins, "user", key)
        citing = [o.text for o in origins if any(e.message_id in message_ids for e in o.evidence)]
        if not citing:
            return ()
        said = await words()
        if said is None:
            return ()
        stale = [text for text in citing if not check(text, said).supported]
        withdrawn = []
        for text in stale:  # one change each: each can be undone on its own
            try:
                removal = [Operation("remove", old_text=entry_handle(text))]
                await asyncio.to_thread(
                    self._memory.apply, "user", key, removal, Origin("withdrawn", session_id)
                )
            except (NoMatchError, PersonErasedError) as exc:  # gone meanwhile: nothing to do
                log.info("an entry could not be withdrawn: %s", type(exc).__name__)
                continue
            withdrawn.append(text)
        if withdrawn:
            log.info("withdrew %d entries: the message grounding them was edited", len(withdrawn))
        return tuple(withdrawn)

    async def _unstage(self, key: str, message_ids: set[int], words: Words) -> None:
        """Drop the staged changes grounded by `message_ids` that the person's words in
        their session (`words`) no longer ground (approving one would write a stale fact)."""
        pending = PendingChanges(self._memory)
        staged = await asyncio.to_thread(pending.list, key)
        citing = [
            c
            for c in staged
            if c.grounded and c.content and any(e.message_id in message_ids for e in c.evidence)
        ]
        if not citing:
            return
        said = await words()
        stale = [c.id for c in citing if said is None or not check(c.content or "", said).supported]
        if stale:
            await asyncio.to_thread(pending.reject, key, stale)
            log.info("dropped %d staged changes: the message grounding them was edited", len(stale))

    def _words(self, session_id: int) -> Words:
        """The person's words in `session_id` as they now read (None: the session is
        gone), read once, when first needed."""
        read: list[OwnWords | None] = []

        async def words() -> OwnWords | None:
            if not read:
                info = await self._sessions.get_session(session_id)
                stored = (
                    None
                    if info is None
                    else await self._sessions.get_messages(info.id, info.scope, lineage=False)
                )
                read.append(None if stored is None else own_words(stored))
            return read[0]

        return words


def media_lines(text: str) -> list[str]:
    """The lines of a stored message that say what its voice note or picture held (not
    part of a caption, so an edited caption keeps them)."""
    return [
        line
        for line in text.split("\n")
        if line.startswith((VOICE_PREFIX, IMAGE_PREFIX)) or line.strip() == NOT_SHOWN_MARK
    ]

"""Edits, deletions and `/forget` on PostgreSQL: SQLite's `sessions.edits`, the same rows
changed to the same values, each changed message's `words` and `symbols` computed
again from its new content, its time and its speaker (the search index follows).

`edit_message` finds the author first without locks, then takes the person's lock
and fence (`guard`) before it locks and changes the rows, in the order an erasure
takes them, so the two never wait on each other. A forgotten text's old row
versions stay in the table files until VACUUM reuses their space; no statement
reads them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from memory_core.pg.database import Connection
from memory_core.pg.search_text import index_documents
from memory_core.pg.session_writes import clean, symbols
from memory_core.sessions.forgetting import FORGOTTEN, Needles
from memory_core.sessions.models import INTERNAL_SOURCES, EditedMessage
from memory_core.sessions.sql import POSTGRES
from memory_core.sessions.sql.edits import (
    EDITED_AUTHOR,
    EDITED_ROWS,
    PERSON_MESSAGES,
    PERSON_PROMPTS,
    SESSION_TEXTS,
    drop_sessions,
    forgotten_copies,
    internal_sessions,
)
from memory_core.sessions.sql.writes import SET_PROMPT

__all__ = ["edit_message", "forget_words"]

Guard = Callable[[Connection, str], Awaitable[None]]
_Update = tuple[str, str, str | None, bool, float, str | None]
"""A message's new row: role, content, tool calls, own words; its time and speaker."""

_LOCKED_ROWS = EDITED_ROWS.postgres + " FOR UPDATE OF m"  # the messages, not their sessions


async def _all(conn: Connection, sql: str, params: Sequence[object] = ()) -> list[Any]:
    return await (await conn.execute(sql.encode(), params)).fetchall()


async def edit_message(
    conn: Connection,
    *,
    platform: str,
    chat_id: str,
    platform_message_id: str,
    user_key: str | None,
    text: str | None,
    guard: Guard,
) -> EditedMessage | None:
    """`edits.edit_message`; `guard` takes the author's lock and checks the fence."""
    where = (platform, chat_id, platform_message_id)
    owner = user_key
    if owner is None:
        found = await _all(conn, EDITED_AUTHOR.postgres, where)
        if not found:
            return None
        owner = str(found[0][0])
    await guard(conn, owner)
    rows = await _all(conn, _LOCKED_ROWS, (*where, owner))
    if not rows:
        return None
    content = "" if text is None else clean(text)
    deleting = text is None
    changed = [r for r in rows if r[3] != content or (deleting and r[4])]
    rows_words = [("user", content, r[5], r[6]) for r in changed]  # as stored: time, speaker
    vectors = await asyncio.to_thread(index_documents, rows_words) if changed else []
    for row, words in zip(changed, vectors, strict=True):
        await conn.execute(
            "UPDATE messages SET content = %s, own_words = own_words AND NOT %s, "
            "words = %s::tsvector, symbols = %s WHERE id = %s",
            (content, deleting, words, symbols("user", content), row[0]),
        )
    first_id, session_id, _, old_text, *_ = rows[0]
    ids = tuple(int(r[0]) for r in rows)
    new_text = None if text is None else content
    return EditedMessage(int(first_id), int(session_id), owner, str(old_text), new_text, ids)


async def forget_words(
    conn: Connection, user_key: str, message_ids: Sequence[int], texts: Sequence[str]
) -> int:
    """`edits.forget_words`: how many rows changed (messages rewritten or deleted, and
    sessions whose prompt was rewritten or that were deleted)."""
    needles = Needles(texts)
    changed = await _drop_internal(conn, user_key, needles)
    updates: dict[int, _Update] = {}
    for message_id, role, calls, timestamp, speaker in await _forgotten(
        conn, user_key, message_ids
    ):
        updates[int(message_id)] = (role, FORGOTTEN, calls, False, timestamp, speaker)
    if needles:
        for message_id, *row in await _all(conn, PERSON_MESSAGES.postgres, (user_key,)):
            role, content, calls, own_words, timestamp, speaker = updates.get(
                message_id, tuple(row)
            )
            new_content, new_calls = str(needles.scrub(content)), needles.scrub(calls)
            if (new_content, new_calls) != (content, calls) or message_id in updates:
                updates[message_id] = (role, new_content, new_calls, own_words, timestamp, speaker)
    await _rewrite(conn, updates)
    return changed + len(updates) + await _scrub_prompts(conn, user_key, needles)


async def _forgotten(conn: Connection, user_key: str, message_ids: Sequence[int]) -> list[Any]:
    """(id, role, tool_calls, timestamp, speaker_name) of the named messages of `user_key`
    and their copies (same conversation, role, time and text) not already forgotten."""
    ids = {int(i) for i in message_ids}
    if not ids:
        return []
    return await _all(conn, *forgotten_copies(POSTGRES, user_key, ids, FORGOTTEN))


async def _rewrite(conn: Connection, updates: dict[int, _Update]) -> None:
    """Store each message's new content, tool calls and own-words flag, with the
    `words` and `symbols` its new content gives."""
    if not updates:
        return
    ids = list(updates)
    rows = [(role, content, ts, speaker) for role, content, _, _, ts, speaker in updates.values()]
    vectors = await asyncio.to_thread(index_documents, rows)
    for message_id, vector in zip(ids, vectors, strict=True):
        role, content, calls, own_words, _, _ = updates[message_id]
        await conn.execute(
            "UPDATE messages SET content = %s, tool_calls = %s, own_words = %s, "
            "words = %s::tsvector, symbols = %s WHERE id = %s",
            (content, calls, own_words, vector, symbols(role, content), message_id),
        )


async def _scrub_prompts(conn: Connection, user_key: str, needles: Needles) -> int:
    if not needles:
        return 0
    changed = 0
    for session_id, prompt in await _all(conn, PERSON_PROMPTS.postgres, (user_key,)):
        if needles.holds(prompt):
            await conn.execute(SET_PROMPT.postgres, (needles.scrub(prompt), session_id))
            changed += 1
    return changed


async def _drop_internal(conn: Connection, user_key: str, needles: Needles) -> int:
    """Delete `user_key`'s background runs' sessions that hold a text; rows deleted."""
    if not needles:
        return 0
    holding: list[int] = []
    for session_id, prompt in await _all(
        conn, *internal_sessions(POSTGRES, user_key, INTERNAL_SOURCES)
    ):
        texts = await _all(conn, SESSION_TEXTS.postgres, (session_id,))
        if needles.holds(prompt) or any(needles.holds(a) or needles.holds(b) for a, b in texts):
            holding.append(int(session_id))
    if not holding:
        return 0
    counts = [
        (await conn.execute(sql, params)).rowcount
        for sql, params in drop_sessions(POSTGRES, holding)
    ]
    return counts[0] + counts[-1]

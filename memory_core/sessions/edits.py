"""Changes to what a person said, after it was stored: an edit or deletion on the
platform, and `/forget`.

`edit_message` finds a person's message by its platform id in the sessions of one
chat (the first row and the copies a compression carried into later sessions of
the conversation; never a background run's own session, which holds no platform
ids) and gives every row the new text; a deleted message keeps its row, so the
conversation's order holds, with empty content and `own_words` off. A message
not stored yet (an edit that raced its turn) is not found: the store keeps what
the turn then writes.

`forget_words` removes texts for good: the person's messages named by id become
`FORGOTTEN` (with their copies), every occurrence of the texts in their messages,
tool calls and stored prompts becomes `FORGOTTEN`, and a background run's own
session (review, extraction) holding one is deleted whole. Then both full-text
indexes are merged and the WAL checkpointed, as an erasure does (``secure_delete``
is on), so no byte of the texts stays in state.db, its WAL or its -shm.

The triggers of `schema` keep both indexes in step with every changed row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from memory_core.sessions.connection import transaction
from memory_core.sessions.forgetting import FORGOTTEN, Needles
from memory_core.sessions.models import INTERNAL_SOURCES, EditedMessage
from memory_core.sessions.schema import optimize_indexes
from memory_core.sessions.sql import SQLITE
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
from memory_core.sessions.writes import without_lone_surrogates


def edit_message(
    conn: sqlite3.Connection,
    *,
    platform: str,
    chat_id: str,
    platform_message_id: str,
    user_key: str | None,
    text: str | None,
    check: Callable[[str], None],
) -> EditedMessage | None:
    """Give a person's stored message its new `text` (None: deleted); None when no such
    message is stored. `user_key` None: whoever wrote it in that chat. `check` is
    called with the author before anything changes (the erasure fence)."""
    where = (platform, chat_id, platform_message_id)
    with transaction(conn):
        owner = user_key
        if owner is None:
            found = conn.execute(EDITED_AUTHOR.sqlite, where).fetchone()
            if found is None:
                return None
            owner = str(found[0])
        rows = conn.execute(EDITED_ROWS.sqlite, (*where, owner)).fetchall()
        if not rows:
            return None
        check(owner)
        content = "" if text is None else without_lone_surrogates(text)
        own_words = 0 if text is None else None  # an edit keeps the row's own_words
        for row in rows:
            if row[3] != content or (own_words == 0 and row[4]):
                conn.execute(
                    "UPDATE messages SET content = ?, own_words = coalesce(?, own_words) "
                    "WHERE id = ?",
                    (content, own_words, row[0]),
                )
    first_id, session_id, _, old_text, *_ = rows[0]
    ids = tuple(int(r[0]) for r in rows)
    new_text = None if text is None else content
    return EditedMessage(int(first_id), int(session_id), owner, str(old_text), new_text, ids)


def forget_words(
    conn: sqlite3.Connection, user_key: str, message_ids: Sequence[int], texts: Sequence[str]
) -> int:
    """Forget `texts` and the messages `message_ids` of `user_key` for good (see the
    module docstring); how many rows changed: messages rewritten or deleted, and
    sessions whose prompt was rewritten or that were deleted."""
    needles = Needles(texts)
    with transaction(conn):
        changed = _drop_internal(conn, user_key, needles)
        rewritten = _forget_messages(conn, user_key, message_ids)
        rewritten |= _scrub_messages(conn, user_key, needles)
        changed += len(rewritten) + _scrub_prompts(conn, user_key, needles)
        if changed:
            optimize_indexes(conn)  # the old words leave the index segments too
    if changed:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return changed


def _forget_messages(
    conn: sqlite3.Connection, user_key: str, message_ids: Sequence[int]
) -> set[int]:
    """The named messages of `user_key`, and their copies (same conversation, role, time
    and text), become `FORGOTTEN`, no longer their own words; the ids changed."""
    ids = {int(i) for i in message_ids}
    if not ids:
        return set()
    changed: set[int] = set()
    for copy_id, *_ in conn.execute(*forgotten_copies(SQLITE, user_key, ids, FORGOTTEN)):
        conn.execute(
            "UPDATE messages SET content = ?, own_words = 0 WHERE id = ?", (FORGOTTEN, copy_id)
        )
        changed.add(int(copy_id))
    return changed


def _scrub_messages(conn: sqlite3.Connection, user_key: str, needles: Needles) -> set[int]:
    """Every occurrence of the texts in `user_key`'s messages and tool calls replaced."""
    if not needles:
        return set()
    changed: set[int] = set()
    for message_id, _, content, tool_calls, *_ in conn.execute(
        PERSON_MESSAGES.sqlite, (user_key,)
    ).fetchall():
        new_content, new_calls = needles.scrub(content), needles.scrub(tool_calls)
        if (new_content, new_calls) != (content, tool_calls):
            conn.execute(
                "UPDATE messages SET content = ?, tool_calls = ? WHERE id = ?",
                (new_content, new_calls, message_id),
            )
            changed.add(int(message_id))
    return changed


def _scrub_prompts(conn: sqlite3.Connection, user_key: str, needles: Needles) -> int:
    """Every occurrence of the texts in `user_key`'s stored system prompts replaced."""
    if not needles:
        return 0
    changed = 0
    for session_id, prompt in conn.execute(PERSON_PROMPTS.sqlite, (user_key,)).fetchall():
        if needles.holds(prompt):
            conn.execute(SET_PROMPT.sqlite, (needles.scrub(prompt), session_id))
            changed += 1
    return changed


def _drop_internal(conn: sqlite3.Connection, user_key: str, needles: Needles) -> int:
    """Delete `user_key`'s background runs' sessions that hold a text; rows deleted."""
    if not needles:
        return 0
    holding: list[int] = []
    sessions = internal_sessions(SQLITE, user_key, INTERNAL_SOURCES)
    for session_id, prompt in conn.execute(*sessions).fetchall():
        texts = conn.execute(SESSION_TEXTS.sqlite, (session_id,)).fetchall()
        if needles.holds(prompt) or any(needles.holds(a) or needles.holds(b) for a, b in texts):
            holding.append(int(session_id))
    if not holding:
        return 0
    counts = [conn.execute(sql, params).rowcount for sql, params in drop_sessions(SQLITE, holding)]
    return counts[0] + counts[-1]

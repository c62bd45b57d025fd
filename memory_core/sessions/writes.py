"""Writes to state.db: messages (creating sessions lazily), ends, children, erasure,
and what a session needs to resume: its system prompt and review counters.

Every function takes the writer connection and runs one IMMEDIATE
transaction. Message writes are idempotent: a message is identified inside
its session by its platform message id, else by its caller key, both under
unique indexes, and inserted with ``INSERT OR IGNORE``. Text that UTF-8 cannot
hold (a lone surrogate, which a platform's JSON can carry) is stored with
U+FFFD in its place, so such a message is kept, never refused.

A person's message appended last of its batch (a turn stores it alone, before
the model is asked) is marked unanswered in its insert. The first new reply,
tool step or stop note of a later batch answers the session's newest marked
message (a turn's reply follows its own message: the session's lock keeps
turns apart), in the same transaction; so does a fault line kept on it
(`record_notice`), and the end of its session clears its marks. One stored
again when later messages follow it (its turn found it answered already, or
overtaken) loses its mark too.
`chats.unanswered` lists the marked messages.

The statements shared with PostgreSQL's store are `memory_core.sessions.sql.writes`.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.errors import InvalidMessageError, SessionConflictError, SessionNotFoundError
from memory_core.sessions.connection import transaction
from memory_core.sessions.models import (
    AppendResult,
    CounterUpdate,
    NewMessage,
    SessionOrigin,
)
from memory_core.sessions.schema import optimize_indexes
from memory_core.sessions.sql import SQLITE
from memory_core.sessions.sql import writes as sql
from memory_core.sessions.word_index import owner_token

_INSERT_MESSAGE = """
INSERT OR IGNORE INTO messages(session_id, role, content, tool_name, tool_calls, tool_call_id,
    timestamp, platform_message_id, speaker_name, dedupe_key, own_words, unanswered)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

# The session's newest message still waiting for its answer, older than the reply
# just inserted, is answered by it.
_ANSWERED = (
    "UPDATE messages SET unanswered = NULL WHERE id = (SELECT max(id) FROM messages "
    "INDEXED BY messages_unanswered WHERE session_id = ? AND unanswered IS NOT NULL AND id < ?)"
)


# A person's message stored again (its turn runs once more) with later messages after it
# in its session is answered already or never will be (its turn answers only the
# session's last message): it waits no longer.
_OVERTAKEN = (
    "UPDATE messages SET unanswered = NULL WHERE id = ? AND unanswered IS NOT NULL "
    "AND EXISTS (SELECT 1 FROM messages WHERE session_id = ? AND id > ?)"
)


@dataclass(frozen=True)
class DeleteResult:
    """How much of a person's history was removed."""

    sessions: int
    messages: int


def append_messages(
    conn: sqlite3.Connection,
    origin: SessionOrigin,
    messages: Sequence[NewMessage],
    counters: CounterUpdate | None = None,
) -> AppendResult:
    """Append `messages` to the open session of `origin.session_key`, creating it if needed.

    `counters` moves the session's review counters in the same transaction,
    only if a message was new (a turn written twice counts once). A person's
    message last in `messages` waits for its answer; a new message of another
    role answers the session's newest one waiting (see the module docstring).
    """
    if not messages:
        raise InvalidMessageError("append_messages needs at least one message")
    with transaction(conn):
        session_id, created = _open_session(conn, origin, messages[0].timestamp)
        ids: list[int] = []
        inserted = 0
        answering = True  # the first new reply answers the newest message waiting
        for n, message in enumerate(messages, start=1):
            waits = message.role == "user" and n == len(messages)
            cursor = conn.execute(_INSERT_MESSAGE, _message_row(session_id, message, waits))
            if message.role == "user":
                answering = False  # a reply after it in this batch answers this one
            if cursor.rowcount == 1:
                ids.append(int(cursor.lastrowid or 0))
                inserted += 1
                if answering:
                    conn.execute(_ANSWERED, (session_id, ids[-1]))
                    answering = False
            else:
                ids.append(_existing_message_id(conn, session_id, message))
                if waits:
                    conn.execute(_OVERTAKEN, (ids[-1], session_id, ids[-1]))
        if counters is not None and inserted:
            _bump_counters(conn, session_id, counters)
    return AppendResult(session_id, created, tuple(ids), inserted)


def _bump_counters(conn: sqlite3.Connection, session_id: int, update: CounterUpdate) -> None:
    conn.execute(sql.BUMP_COUNTERS.sqlite, (*counter_params(update), session_id))


def counter_params(c: CounterUpdate) -> tuple[object, ...]:
    """`sql.writes.BUMP_COUNTERS`' parameters before the session id (either backend)."""
    return (c.memory_written, c.turns, c.skill_written, c.steps)


def set_system_prompt(conn: sqlite3.Connection, session_id: int, prompt: str) -> str:
    """Store the session's system prompt unless it has one; return the one it keeps.

    A prompt is stored once: a second caller gets the first one back, so
    every request of the session starts with the same bytes.
    """
    with transaction(conn):
        row = conn.execute(sql.STORED_PROMPT.sqlite, (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError(f"no session {session_id}")
        if row[0] is not None:
            return str(row[0])
        conn.execute(sql.SET_PROMPT.sqlite, (prompt, session_id))
    return prompt


def clear_system_prompts(conn: sqlite3.Connection, user_key: str) -> int:
    """Forget the stored prompts of `user_key`'s open sessions; return how many.

    Their next turn builds a fresh prompt from the memory as it is now: after a
    person removes a fact, no stored prompt may still carry it.
    """
    with transaction(conn):
        cursor = conn.execute(sql.CLEAR_PROMPTS.sqlite, (user_key,))
    return cursor.rowcount


def record_notice(conn: sqlite3.Connection, message_id: int, notice: str) -> bool:
    """Keep on a person's message the line they got instead of an answer (a model
    fault); whether such a message was there. It then counts as answered (its
    mark goes: `chats.unanswered` skips it); no request ever carries the line."""
    with transaction(conn):
        cursor = conn.execute(
            sql.RECORD_NOTICE.sqlite, (without_lone_surrogates(notice), message_id)
        )
    return cursor.rowcount == 1


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(text: str) -> str:
    """`text` with each lone surrogate (which UTF-8 cannot encode, so SQLite would refuse
    the whole row) replaced by U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def _clean(text: str | None) -> str | None:
    return None if text is None else without_lone_surrogates(text)


def _message_row(session_id: int, m: NewMessage, waits: bool = False) -> tuple[object, ...]:
    return (
        session_id,
        m.role,
        _clean(m.content),
        m.tool_name,
        _clean(m.tool_calls),
        m.tool_call_id,
        float(m.timestamp),
        m.platform_message_id,
        _clean(m.speaker_name),
        m.key,
        int(bool(m.own_words)),
        1 if waits else None,
    )


def _existing_message_id(conn: sqlite3.Connection, session_id: int, m: NewMessage) -> int:
    row = conn.execute(
        sql.STORED_MESSAGE.sqlite, (session_id, m.platform_message_id, m.key)
    ).fetchone()
    return int(row[0])


def _open_session(
    conn: sqlite3.Connection, origin: SessionOrigin, first_at: float
) -> tuple[int, bool]:
    row = conn.execute(sql.OPEN_SESSION.sqlite, (origin.session_key,)).fetchone()
    if row is not None:
        if (row[1], row[2]) != (origin.user_key, origin.chat_id):
            raise SessionConflictError(
                f"session key {origin.session_key!r} is open for another user or chat"
            )
        return int(row[0]), False
    cursor = conn.execute(
        sql.INSERT_SESSION.sqlite,
        new_session_row(origin, first_at, _previous_session(conn, origin)),
    )
    if cursor.rowcount != 1:  # the one writer found none open just above: never silent
        raise SessionConflictError(f"session key {origin.session_key!r} could not be opened")
    session_id = int(cursor.lastrowid or 0)
    conn.execute(sql.ROOT_ITSELF.sqlite, (session_id,))
    return session_id, True


def _previous_session(conn: sqlite3.Connection, origin: SessionOrigin) -> int | None:
    """The last ended session of this routing key and person: a new one links to it.

    The link is only a pointer back; the new session starts a lineage of its
    own (`root_id` is itself), so recall still sees the old one as another
    conversation.
    """
    row = conn.execute(
        sql.PREVIOUS_SESSION.sqlite, (origin.user_key, origin.chat_id, origin.session_key)
    ).fetchone()
    return None if row is None else int(row[0])


def end_session(conn: sqlite3.Connection, session_id: int, reason: str, now: float) -> None:
    """Mark a session ended; ending an ended session keeps its first end.

    Its stored system prompt is dropped: an ended session never resumes, and
    the prompt holds a copy of the person's profile that need not outlive it.
    If it holds messages the extraction has not covered, its session-end
    extraction becomes due (see `backlog`).
    """
    with transaction(conn):
        row = conn.execute(sql.SESSION_END.sqlite, (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError(f"no session {session_id}")
        if row[0] is None:
            end_open_session(conn, session_id, reason, now)


def end_open_session(conn: sqlite3.Connection, session_id: int, reason: str, now: float) -> None:
    """End an open session; due for extraction if it has messages past its mark.

    Imported sessions and the background agents' own are never due. Its
    messages wait for no answer any more (an ended session is never answered).
    """
    conn.execute(
        "UPDATE messages INDEXED BY messages_unanswered SET unanswered = NULL "
        "WHERE session_id = ? AND unanswered IS NOT NULL",
        (session_id,),
    )
    conn.execute(*sql.end_open_session(SQLITE, session_id, reason, now))


def start_child_session(
    conn: sqlite3.Connection,
    parent_id: int,
    *,
    now: float,
    end_reason: str = "compression",
    model: str | None = None,
    title: str | None = None,
    messages: Sequence[NewMessage] = (),
) -> int:
    """End `parent_id` (if open) and start its continuation, which takes over its routing key.

    The child belongs to the same person and chat as the parent and shares
    its lineage root, so search reports both as one conversation. It takes
    over the parent's review counters (the conversation goes on), but not its
    system prompt: the child gets a fresh one, and the parent's is dropped.
    `messages` (a compression's summary and kept tail) are its first messages,
    written in the same transaction, so no child is ever seen without them; the
    copy of a person's message the parent had not answered (the turn that is
    compressing) waits for its answer in the child.
    """
    with transaction(conn):
        parent = conn.execute(
            "SELECT source, user_key, chat_id, chat_type, thread_id, session_key, model, title, "
            "root_id, ended_at, owner_token, turns_since_memory, steps_since_skill "
            "FROM sessions WHERE id = ?",
            (parent_id,),
        ).fetchone()
        if parent is None:
            raise SessionNotFoundError(f"no session {parent_id}")
        waiting = {
            row[0]
            for row in conn.execute(
                "SELECT platform_message_id FROM messages INDEXED BY messages_unanswered "
                "WHERE session_id = ? AND unanswered IS NOT NULL",
                (parent_id,),
            )
        }
        if parent[9] is None:
            end_open_session(conn, parent_id, end_reason, now)
        cursor = conn.execute(
            sql.INSERT_CHILD_SESSION.sqlite, child_session_row(parent, parent_id, now, model, title)
        )
        if cursor.rowcount != 1:
            raise SessionConflictError(
                f"session key {parent[5]!r} already has another open session"
            )
        child_id = int(cursor.lastrowid or 0)
        for message in messages:
            waits = message.role == "user" and message.platform_message_id in waiting - {None}
            conn.execute(_INSERT_MESSAGE, _message_row(child_id, message, waits))
        return child_id


def delete_user(conn: sqlite3.Connection, user_key: str, *, purge: bool = True) -> DeleteResult:
    """Remove every session and message of one person, their index entries and the
    messages of theirs still waiting for a session (`inbox`).

    With `purge`, the full-text indexes are merged afterwards so the deleted
    words leave the index segments too, and the WAL is checkpointed.
    """
    with transaction(conn):
        messages = conn.execute(sql.DELETE_USER_MESSAGES.sqlite, (user_key,)).rowcount
        conn.execute(sql.DELETE_USER_QUEUED.sqlite, (user_key,))  # waiting messages
        conn.execute(sql.UNLINK_USER_SESSIONS.sqlite, (user_key,))
        sessions = conn.execute(sql.DELETE_USER_SESSIONS.sqlite, (user_key,)).rowcount
        if purge and sessions:
            optimize_indexes(conn)
    if purge and sessions:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return DeleteResult(sessions=sessions, messages=messages)


def new_session_row(
    origin: SessionOrigin, first_at: float, parent: int | None
) -> tuple[object, ...]:
    """A new session's values, in the insert's column order (source, user_key, owner_token,
    chat_id, chat_type, thread_id, session_key, title, model, started_at,
    parent_session_id), on either backend."""
    return (
        origin.source,
        origin.user_key,
        owner_token(origin.user_key),
        origin.chat_id,
        origin.chat_type,
        origin.thread_id,
        origin.session_key,
        origin.title,
        origin.model,
        float(first_at),
        parent,
    )


def child_session_row(
    parent: Sequence[Any], parent_id: int, now: float, model: str | None, title: str | None
) -> tuple[object, ...]:
    """`sql.writes.INSERT_CHILD_SESSION`'s values from the parent's row (read with
    `start_child_session`'s columns), on either backend."""
    return (
        *parent[:6],
        model or parent[6],
        title or parent[7],
        now,
        parent_id,
        parent[8],
        *parent[10:13],
    )

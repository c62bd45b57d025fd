"""Writes of the PostgreSQL session store: the statements of SQLite's `writes`,
`chats`, `inbox` and `backlog` writes, each function one transaction's work.

Every function takes a connection inside a transaction (`PgDatabase.transact`
runs it, again on a conflict). Where SQLite relied on its single writer, a
session's row is locked `FOR UPDATE` first, so two processes appending to one
session take turns: ids follow the order the appends committed, and the unique
indexes with ``ON CONFLICT DO NOTHING`` keep a message written twice once.
The writes about a person take `person_lock` shared, the erasure exclusive:
an erasure waits for the writes already past their fence check, and sees
their rows (see `sessions.PgSessionStore`).

A person's message waits for its answer as in SQLite (`writes`): marked in its
insert, cleared by the insert of the first reply after it (a data-modifying
`WITH` in the same statement, so no round trip is added to a turn), by its
fault line and by its session's end.

Text is cleaned as SQLite's store cleans it (lone surrogates become U+FFFD),
and NUL characters, which PostgreSQL text cannot hold, become U+FFFD too.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncCursor

from memory_core.errors import InvalidMessageError, SessionConflictError, SessionNotFoundError
from memory_core.pg.database import Connection
from memory_core.pg.search_text import IndexRow
from memory_core.sessions.models import (
    AppendResult,
    CounterUpdate,
    NewMessage,
    SessionOrigin,
)
from memory_core.sessions.query import SYMBOL_CLASS
from memory_core.sessions.sql import POSTGRES
from memory_core.sessions.sql import writes as sql
from memory_core.sessions.writes import (
    DeleteResult,
    child_session_row,
    counter_params,
    new_session_row,
    without_lone_surrogates,
)

_SYMBOL = re.compile(f"[{SYMBOL_CLASS}]")

_INSERT_MESSAGE = """
INSERT INTO messages (session_id, role, content, tool_name, tool_calls, tool_call_id,
    timestamp, platform_message_id, speaker_name, dedupe_key, own_words, words, symbols,
    unanswered)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::tsvector, %s, %s)
ON CONFLICT DO NOTHING RETURNING id
"""

# `_INSERT_MESSAGE` of a reply: the session's newest message waiting for its answer is
# answered by it, unless the reply is stored already (then it was, when it was stored).
# Parameters: session id, session id, the reply's key, then `message_row`'s.
_INSERT_ANSWER = (
    """
WITH answered AS (
    UPDATE messages SET unanswered = NULL WHERE id = (
        SELECT max(w.id) FROM messages w WHERE w.session_id = %s AND w.unanswered)
    AND NOT EXISTS (SELECT 1 FROM messages d WHERE d.session_id = %s AND d.dedupe_key = %s)
)"""
    + _INSERT_MESSAGE
)


def clean(text: str) -> str:
    """`text` as PostgreSQL can store it: no lone surrogate, no NUL."""
    return without_lone_surrogates(text).replace("\x00", "\ufffd")


def _clean(text: str | None) -> str | None:
    return None if text is None else clean(text)


def symbols(role: str, content: str) -> str | None:
    """The `symbols` column: the content when it holds an emoji or symbol (not tool)."""
    return content if role != "tool" and _SYMBOL.search(content) else None


def person_lock(user_key: str) -> int:
    """The advisory lock key of a person's session rows (64 bits of a hash)."""
    digest = hashlib.blake2b(b"mnemo-sessions:" + user_key.encode("utf-8", "surrogatepass"))
    return int.from_bytes(digest.digest()[:8], "big", signed=True)


async def lock_person(conn: Connection, user_key: str, *, exclusive: bool) -> None:
    """Hold `person_lock(user_key)` until the transaction ends."""
    kind = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    await conn.execute(f"SELECT {kind}(%s)", (person_lock(user_key),))


def index_row(m: NewMessage) -> IndexRow:
    """What the message's `words` are made of, as `message_row` stores it."""
    return (m.role, clean(m.content), float(m.timestamp), _clean(m.speaker_name))


def message_row(
    session_id: int, m: NewMessage, words: str | None, waits: bool = False
) -> tuple[object, ...]:
    """The parameters of `_INSERT_MESSAGE`; `words` is the message's tsvector literal,
    `waits` whether it is a person's message waiting for its answer."""
    content = clean(m.content)
    return (
        session_id,
        m.role,
        content,
        m.tool_name,
        _clean(m.tool_calls),
        m.tool_call_id,
        float(m.timestamp),
        m.platform_message_id,
        _clean(m.speaker_name),
        m.key,
        bool(m.own_words),
        words,
        symbols(m.role, content),
        True if waits else None,
    )


async def _one(conn: Connection, sql: str, params: Sequence[object] = ()) -> Any:
    return await (await conn.execute(sql.encode(), params)).fetchone()


def open_session_lookup(origin: SessionOrigin) -> tuple[bytes, tuple[object, ...]]:
    """The first look for the open session of `origin` (locked), for a caller to send
    ahead, in the round trip of its own statements (`append_messages`' `looked_up`)."""
    return sql.OPEN_SESSION.postgres.encode(), (origin.session_key,)


async def append_messages(
    conn: Connection,
    origin: SessionOrigin,
    messages: Sequence[NewMessage],
    words: Sequence[str | None],
    counters: CounterUpdate | None = None,
    looked_up: AsyncCursor[Any] | None = None,
) -> AppendResult:
    """`writes.append_messages`: into the open session of `origin`, created if needed.
    `looked_up`: `open_session_lookup(origin)`, sent already in this transaction."""
    if not messages:
        raise InvalidMessageError("append_messages needs at least one message")
    session_id, created = await _open_session(conn, origin, messages[0].timestamp, looked_up)
    ids: list[int] = []
    inserted = 0
    answering = True  # the first new reply answers the newest message waiting
    for n, (message, vector) in enumerate(zip(messages, words, strict=True), start=1):
        waits = message.role == "user" and n == len(messages)
        values = message_row(session_id, message, vector, waits)
        if message.role != "user" and answering:
            row = await _one(conn, _INSERT_ANSWER, (session_id, session_id, message.key, *values))
            answering = row is None
        else:
            row = await _one(conn, _INSERT_MESSAGE, values)
            answering = answering and message.role != "user"  # answered in this batch
        if row is not None:
            ids.append(int(row[0]))
            inserted += 1
        else:
            ids.append(await _existing_message_id(conn, session_id, message, waits))
    if counters is not None and inserted:
        await conn.execute(sql.BUMP_COUNTERS.postgres, (*counter_params(counters), session_id))
    return AppendResult(session_id, created, tuple(ids), inserted)


async def _existing_message_id(
    conn: Connection, session_id: int, m: NewMessage, waits: bool = False
) -> int:
    """The id of `m` stored before; with `waits`, its mark goes in the same statement when
    later messages follow it (`writes._OVERTAKEN`)."""
    found = sql.STORED_MESSAGE.postgres
    if not waits:
        row = await _one(conn, found, (session_id, m.platform_message_id, m.key))
        return int(row[0])
    row = await _one(
        conn,
        f"WITH found AS ({found}), overtaken AS (UPDATE messages w SET unanswered = NULL "
        "FROM found WHERE w.id = found.id AND w.unanswered AND EXISTS (SELECT 1 FROM "
        "messages x WHERE x.session_id = %s AND x.id > found.id)) SELECT id FROM found",
        (session_id, m.platform_message_id, m.key, session_id),
    )
    return int(row[0])


async def _open_session(
    conn: Connection,
    origin: SessionOrigin,
    first_at: float,
    looked_up: AsyncCursor[Any] | None = None,
) -> tuple[int, bool]:
    """The open session of the routing key, locked; created (and locked) when there is none.

    Two processes creating it at once: the unique index lets one insert, the
    other finds it on its second look (after the first committed). The first look
    is `looked_up` when the caller sent it already.
    """
    for _ in range(2):
        if looked_up is not None:
            row, looked_up = await looked_up.fetchone(), None
        else:
            row = await _one(conn, sql.OPEN_SESSION.postgres, (origin.session_key,))
        if row is not None:
            if (row[1], row[2]) != (origin.user_key, origin.chat_id):
                raise SessionConflictError(
                    f"session key {origin.session_key!r} is open for another user or chat"
                )
            return int(row[0]), False
        parent = await _previous(conn, origin)
        made = await _one(
            conn, sql.INSERT_SESSION.postgres, new_session_row(origin, first_at, parent)
        )
        if made is not None:
            session_id = int(made[0])
            await conn.execute(sql.ROOT_ITSELF.postgres, (session_id,))
            return session_id, True
    raise SessionConflictError(f"session key {origin.session_key!r} could not be opened")


async def _previous(conn: Connection, origin: SessionOrigin) -> int | None:
    """The last ended session of this routing key and person (`writes._previous_session`)."""
    row = await _one(
        conn, sql.PREVIOUS_SESSION.postgres, (origin.user_key, origin.chat_id, origin.session_key)
    )
    return None if row is None else int(row[0])


async def set_system_prompt(conn: Connection, session_id: int, prompt: str) -> str:
    """`writes.set_system_prompt`: stored once; the one kept is returned."""
    row = await _one(conn, sql.STORED_PROMPT.postgres, (session_id,))
    if row is None:
        raise SessionNotFoundError(f"no session {session_id}")
    if row[0] is not None:
        return str(row[0])
    await conn.execute(sql.SET_PROMPT.postgres, (clean(prompt), session_id))
    return prompt


async def clear_system_prompts(conn: Connection, user_key: str) -> int:
    """`writes.clear_system_prompts`: the person's open sessions' prompts dropped; how many."""
    cursor = await conn.execute(sql.CLEAR_PROMPTS.postgres, (user_key,))
    return cursor.rowcount


async def record_notice(conn: Connection, message_id: int, notice: str) -> bool:
    """`writes.record_notice`: whether that person's message was there (answered now)."""
    cursor = await conn.execute(sql.RECORD_NOTICE.postgres, (clean(notice), message_id))
    return cursor.rowcount == 1


async def end_session(conn: Connection, session_id: int, reason: str, now: float) -> None:
    """`writes.end_session`: ending an ended session keeps its first end."""
    row = await _one(conn, sql.SESSION_END.postgres, (session_id,))
    if row is None:
        raise SessionNotFoundError(f"no session {session_id}")
    if row[0] is None:
        await end_open_session(conn, session_id, reason, now)


async def end_open_session(conn: Connection, session_id: int, reason: str, now: float) -> None:
    """`writes.end_open_session`: due for extraction if it has messages past its mark; its
    messages wait for no answer any more."""
    end, params = sql.end_open_session(POSTGRES, session_id, reason, now)
    await conn.execute(
        "WITH answered AS (UPDATE messages SET unanswered = NULL "
        f"WHERE session_id = %s AND unanswered) {end}",
        (session_id, *params),
    )


async def start_child_session(
    conn: Connection,
    parent_id: int,
    *,
    now: float,
    end_reason: str,
    model: str | None,
    title: str | None,
    messages: Sequence[NewMessage],
    words: Sequence[str | None],
) -> int:
    """`writes.start_child_session`: the parent ended, its continuation started (the copy
    of a person's message the parent had not answered waits in the child)."""
    parent = await _one(
        conn,
        "SELECT source, user_key, chat_id, chat_type, thread_id, session_key, model, title, "
        "root_id, ended_at, owner_token, turns_since_memory, steps_since_skill, "
        "(SELECT array_agg(m.platform_message_id) FROM messages m "
        "WHERE m.session_id = sessions.id AND m.unanswered) "
        "FROM sessions WHERE id = %s FOR UPDATE",
        (parent_id,),
    )
    if parent is None:
        raise SessionNotFoundError(f"no session {parent_id}")
    if parent[9] is None:
        await end_open_session(conn, parent_id, end_reason, now)
    made = await _one(
        conn,
        sql.INSERT_CHILD_SESSION.postgres,
        child_session_row(parent, parent_id, now, model, title),
    )
    if made is None:
        raise SessionConflictError(f"session key {parent[5]!r} already has another open session")
    child_id = int(made[0])
    waiting = {m for m in parent[13] or () if m is not None}
    for message, vector in zip(messages, words, strict=True):
        waits = message.role == "user" and message.platform_message_id in waiting
        await conn.execute(_INSERT_MESSAGE.encode(), message_row(child_id, message, vector, waits))
    return child_id


async def migrate_chat(
    conn: Connection, source: str, old_chat_id: str, new_chat_id: str, now: float
) -> int:
    """`chats.migrate_chat`: the chat's sessions and routing keys under the new id."""
    cursor = await conn.execute(sql.CHAT_SESSIONS.postgres, (source, old_chat_id))
    rows = await cursor.fetchall()
    for session_id, key, chat_type, ended_at in rows:
        prefix = f"{source}:{chat_type}:{old_chat_id}"
        if key is not None and (key == prefix or key.startswith(prefix + ":")):
            key = f"{source}:{chat_type}:{new_chat_id}" + key[len(prefix) :]
        if ended_at is None and await _open_elsewhere(conn, key, session_id):
            await end_open_session(conn, session_id, "migrated", now)
        await conn.execute(sql.MOVE_SESSION.postgres, (new_chat_id, key, session_id))
    return len(rows)


async def _open_elsewhere(conn: Connection, key: str | None, session_id: int) -> bool:
    row = await _one(conn, sql.OPEN_ELSEWHERE.postgres, (key, session_id))
    return row is not None


def queue_insert(
    session_key: str, user_key: str, source: str, payload: str, now: float
) -> tuple[bytes, tuple[object, ...]]:
    """`inbox.queue`'s statement: one message kept for its busy session (its queue id
    read by `queued_id`), for the caller to send with the write's guard."""
    return sql.QUEUE.postgres.encode(), (session_key, user_key, source, clean(payload), now)


async def queued_id(conn: Connection, inserted: AsyncCursor[Any]) -> int:
    """The queue id `queue_insert` returned."""
    row = await inserted.fetchone()
    assert row is not None  # an insert that returns its id
    return int(row[0])


async def drop_queued(conn: Connection, queue_id: int) -> None:
    await conn.execute(sql.DROP_QUEUED.postgres, (queue_id,))


async def mark_extracted(
    conn: Connection, session_id: int, through_message_id: int, *, finished: bool
) -> None:
    """`backlog.mark_extracted`: the mark only moves forward."""
    await conn.execute(sql.MARK_EXTRACTED.postgres, (int(through_message_id), finished, session_id))


async def reset_counters(conn: Connection, session_id: int) -> None:
    await conn.execute(sql.RESET_COUNTERS.postgres, (session_id,))


async def delete_user(conn: Connection, user_key: str) -> DeleteResult:
    """`writes.delete_user`: the person's messages, waiting messages and sessions.

    Takes `person_lock` exclusive first, so writes already past their fence
    check have committed and are deleted too.
    """
    await lock_person(conn, user_key, exclusive=True)
    messages = await conn.execute(sql.DELETE_USER_MESSAGES.postgres, (user_key,))
    await conn.execute(sql.DELETE_USER_QUEUED.postgres, (user_key,))
    await conn.execute(sql.UNLINK_USER_SESSIONS.postgres, (user_key,))
    sessions = await conn.execute(sql.DELETE_USER_SESSIONS.postgres, (user_key,))
    return DeleteResult(sessions=sessions.rowcount, messages=messages.rowcount)

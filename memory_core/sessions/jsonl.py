"""Import and export of conversation history as JSON Lines.

One message per line::

    {"session": str, "user": str, "platform": str, "chat": str,
     "chat_type": "private"|"group", "role": "user"|"assistant",
     "content": str, "timestamp": ISO-8601 or epoch seconds, "name": str (optional)}

`user` is the person the session belongs to (also on the assistant's lines);
`platform` is where the conversation happened and becomes the session's
`source` (an export writes the source back under this key), and `session` is
its external id, unique per source and user. Exports also carry the rarer
roles `system` and `tool` (with `tool_name`, `tool_calls`, `tool_call_id`), so
an export imports back unchanged; any other key is refused.

A whole file is one transaction: a bad line stops the import with its line
number and nothing is kept, and a killed import leaves nothing behind. The FTS
insert trigger is dropped for the load and the new rows are indexed in one
statement per batch (inside the same transaction). Importing into a session
that already exists adds only the messages it does not hold yet, so running
the same import twice changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import cast

from memory_core.errors import ImportFormatError
from memory_core.sessions.connection import transaction
from memory_core.sessions.models import CHAT_TYPES, ROLES, ChatType
from memory_core.sessions.schema import (
    create_insert_trigger,
    drop_insert_trigger,
    index_rows_after,
    owner_token,
    recount_messages,
)

REQUIRED = ("session", "user", "platform", "chat", "chat_type", "role", "content", "timestamp")
OPTIONAL = ("name", "tool_name", "tool_calls", "tool_call_id")
_BATCH = 5000

_INSERT = (
    "INSERT INTO messages(session_id, role, content, tool_name, tool_calls, tool_call_id, "
    "timestamp, speaker_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


@dataclass(frozen=True)
class ImportResult:
    """What an import added."""

    lines: int
    sessions_created: int
    sessions_extended: int
    messages_inserted: int
    messages_skipped: int


@dataclass
class _Session:
    id: int
    chat: str
    chat_type: ChatType
    created: bool
    first: float
    last: float
    known: set[str] | None = field(default=None)  # hashes of stored messages (existing sessions)


def parse_timestamp(value: object) -> float:
    """Epoch seconds from a JSON number, a numeric string or ISO-8601 (naive means UTC)."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a timestamp")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = float(value)
        except ValueError:
            moment = datetime.fromisoformat(value.strip())
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            seconds = moment.timestamp()
    else:
        raise ValueError(f"{type(value).__name__} is not a timestamp")
    if not math.isfinite(seconds):
        raise ValueError("timestamp is not finite")
    return seconds


def parse_line(text: str, line: int) -> dict[str, object]:
    """Decode and validate one line; raise ImportFormatError naming the line."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(line, f"not valid JSON ({exc.msg})") from None
    if not isinstance(record, dict):
        raise ImportFormatError(line, "a line must hold one JSON object")
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise ImportFormatError(line, f"missing {', '.join(missing)}")
    unknown = sorted(set(record) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise ImportFormatError(line, f"unknown key {unknown[0]!r}")
    for key in ("session", "user", "platform", "chat"):
        if not isinstance(record[key], str) or not record[key].strip():
            raise ImportFormatError(line, f"{key!r} must be a non-empty string")
    if record["chat_type"] not in CHAT_TYPES:
        raise ImportFormatError(
            line, f"'chat_type' must be private or group, not {record['chat_type']!r}"
        )
    if record["role"] not in ROLES:
        raise ImportFormatError(line, f"'role' must be user or assistant, not {record['role']!r}")
    if not isinstance(record["content"], str):
        raise ImportFormatError(line, "'content' must be a string")
    for key in OPTIONAL:
        if record.get(key) is not None and not isinstance(record[key], str):
            raise ImportFormatError(line, f"{key!r} must be a string")
    try:
        record["timestamp"] = parse_timestamp(record["timestamp"])
    except ValueError as exc:
        raise ImportFormatError(line, f"bad timestamp {record['timestamp']!r} ({exc})") from None
    return record


def _fingerprint(role: str, timestamp: float, content: str, name: object) -> str:
    """Identity of an imported message, for re-imports into an existing session."""
    key = f"{role}\0{round(timestamp * 1000)}\0{name or ''}\0{content}"
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


class _Importer:
    """The state of one import: sessions seen so far and rows waiting to be written."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.sessions: dict[tuple[str, str, str], _Session] = {}
        self.pending: list[tuple[object, ...]] = []
        self.inserted = 0
        self.skipped = 0

    def add(self, record: dict[str, object], line: int) -> None:
        session = self._session(record, line)
        ts = float(record["timestamp"])  # type: ignore[arg-type]
        session.first = min(session.first, ts)
        session.last = max(session.last, ts)
        role, content, name = record["role"], record["content"], record.get("name")
        if session.known is not None:
            mark = _fingerprint(str(role), ts, str(content), name)
            if mark in session.known:
                self.skipped += 1
                return
            session.known.add(mark)
        self.pending.append(
            (session.id, role, content, record.get("tool_name"), record.get("tool_calls"),
             record.get("tool_call_id"), ts, name)
        )  # fmt: skip

    def flush(self) -> None:
        if self.pending:
            self.conn.executemany(_INSERT, self.pending)
            self.inserted += len(self.pending)
            self.pending.clear()

    def _session(self, record: dict[str, object], line: int) -> _Session:
        key = (str(record["platform"]), str(record["user"]), str(record["session"]))
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = self._find_or_create(key, record)
        if (session.chat, session.chat_type) != (record["chat"], record["chat_type"]):
            raise ImportFormatError(
                line,
                f"session {key[2]!r} is in chat {session.chat!r} ({session.chat_type}), "
                f"not {record['chat']!r} ({record['chat_type']})",
            )
        return session

    def _find_or_create(self, key: tuple[str, str, str], record: dict[str, object]) -> _Session:
        ts = float(record["timestamp"])  # type: ignore[arg-type]
        row = self.conn.execute(
            "SELECT id, chat_id, chat_type, started_at, ended_at FROM sessions "
            "WHERE source = ? AND user_key = ? AND external_id = ?",
            key,
        ).fetchone()
        if row is not None:
            known = {
                _fingerprint(r, t, c, n)
                for r, t, c, n in self.conn.execute(
                    "SELECT role, timestamp, content, speaker_name FROM messages "
                    "WHERE session_id = ?",
                    (row[0],),
                )
            }
            return _Session(row[0], row[1], row[2], False, row[3], row[4] or row[3], known)
        cursor = self.conn.execute(
            "INSERT INTO sessions(source, user_key, owner_token, chat_id, chat_type, started_at, "
            "ended_at, end_reason, external_id) VALUES (?, ?, ?, ?, ?, ?, ?, 'imported', ?)",
            (
                key[0],
                key[1],
                owner_token(key[1]),
                record["chat"],
                record["chat_type"],
                ts,
                ts,
                key[2],
            ),
        )
        session_id = int(cursor.lastrowid or 0)
        self.conn.execute("UPDATE sessions SET root_id = id WHERE id = ?", (session_id,))
        chat_type = cast(ChatType, record["chat_type"])  # checked by parse_line
        return _Session(session_id, str(record["chat"]), chat_type, True, ts, ts)

    def finish(self) -> None:
        self.flush()
        self.conn.executemany(
            "UPDATE sessions SET started_at = ?, ended_at = ? WHERE id = ?",
            [(s.first, s.last, s.id) for s in self.sessions.values()],
        )
        recount_messages(self.conn, [s.id for s in self.sessions.values()])


def import_lines(
    conn: sqlite3.Connection,
    lines: Iterable[bytes | str],
    *,
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Import JSON Lines (bytes or text, one message each) in one transaction.

    Lines are decoded and validated on a helper thread while this thread
    writes the previous batch, so JSON parsing overlaps SQLite's indexing.
    `progress` is called on this thread with the number of lines just done.
    """
    count = 0
    with transaction(conn):
        indexed = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
        drop_insert_trigger(conn)
        importer = _Importer(conn)
        for batch, consumed in _parsed_batches(lines):
            for line, record in batch:
                importer.add(record, line)
            importer.flush()
            index_rows_after(conn, indexed)
            indexed = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
            count += consumed
            if progress is not None:
                progress(consumed)
        importer.finish()
        create_insert_trigger(conn)
    created = sum(1 for s in importer.sessions.values() if s.created)
    return ImportResult(
        lines=count,
        sessions_created=created,
        sessions_extended=len(importer.sessions) - created,
        messages_inserted=importer.inserted,
        messages_skipped=importer.skipped,
    )


_Batch = tuple[list[tuple[int, dict[str, object]]], int]
_END = object()


def _parsed_batches(lines: Iterable[bytes | str]) -> Iterator[_Batch]:
    """Validated records in batches, parsed on a helper thread; errors re-raised here."""
    channel: queue.Queue[object] = queue.Queue(maxsize=4)
    stop = threading.Event()

    def send(item: object) -> bool:
        while not stop.is_set():
            try:
                channel.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            batch: list[tuple[int, dict[str, object]]] = []
            consumed = 0
            for number, raw in enumerate(lines, start=1):
                text = _decode(raw, number)
                consumed += 1
                if text.strip():
                    batch.append((number, parse_line(text, number)))
                if consumed >= _BATCH:
                    if not send((batch, consumed)):
                        return
                    batch, consumed = [], 0
            if send((batch, consumed)):
                send(_END)
        except BaseException as exc:  # handed to the importing thread, which raises it
            send(exc)

    worker = threading.Thread(target=produce, name="mnemo-import-parser", daemon=True)
    worker.start()
    try:
        while True:
            item = channel.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        worker.join()


def _decode(raw: bytes | str, line: int) -> str:
    if isinstance(raw, str):
        return raw.removeprefix("\ufeff") if line == 1 else raw
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(line, f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    return text.removeprefix("\ufeff") if line == 1 else text


def export_lines(conn: sqlite3.Connection, user_key: str) -> Iterable[str]:
    """Every message of one person, in the import format, one JSON line each (no newline)."""
    rows = conn.execute(
        "SELECT coalesce(s.external_id, CAST(s.id AS TEXT)), s.user_key, s.source, s.chat_id, "
        "s.chat_type, m.role, m.content, m.timestamp, m.speaker_name, m.tool_name, "
        "m.tool_calls, m.tool_call_id FROM sessions s JOIN messages m ON m.session_id = s.id "
        "WHERE s.user_key = ? ORDER BY s.id, m.timestamp, m.id",
        (user_key,),
    )
    for row in rows:
        record: dict[str, object] = dict(zip(REQUIRED, row[:8], strict=True))
        record["timestamp"] = datetime.fromtimestamp(float(row[7]), UTC).isoformat()
        for key, value in zip(OPTIONAL, row[8:], strict=True):
            if value is not None:
                record[key] = value
        yield json.dumps(record, ensure_ascii=False)

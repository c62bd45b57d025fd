"""Import and export of conversation history as JSON Lines.

One message per line::

    {"session": str, "user": str, "platform": str, "chat": str,
     "chat_type": "private"|"group", "role": "user"|"assistant",
     "content": str, "timestamp": ISO-8601 or epoch seconds, "name": str (optional)}

`user` is the person the session belongs to (also on the assistant's lines),
a user key as the bot writes it (`memory_core.user_keys`); `platform` is where
the conversation happened and becomes the session's `source` (an export
writes the source back under this key), and `session` is its external id,
unique per source and user. A session the bot created has no external id;
an export names it ``mnemo:<row id>:<start time>`` (`bot_session_id`), and an
import recognises that name in the database it came from, so an export
imported back into the same database adds nothing. Exports also carry the
rarer roles `system` and `tool` (with `tool_name`, `tool_calls`,
`tool_call_id`), so an export imports back unchanged; any other key is refused.

This module reads and checks the lines; `importer` writes them. A line is
refused, with its number, when it is over `MAX_LINE_BYTES` (4 MiB: far above
any chat message or model reply, and a file without newlines is never read
whole), is not UTF-8 or JSON, nests too deeply, holds a lone surrogate, names
a user key the bot could never produce, or has a timestamp outside the years
1970 to 9999 (ISO-8601 or epoch seconds; nothing else could be shown as a date).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import multiprocessing
import os
import queue
import re
import signal
import sqlite3
import stat
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from typing import IO, Any, NamedTuple, cast

from memory_core.errors import ImportFormatError, InvalidUserKeyError, SessionStoreError
from memory_core.scopes import CHAT_TYPES
from memory_core.sessions.models import ROLES
from memory_core.sessions.sql.reads import EXPORT
from memory_core.sessions.sql.reads import EXPORT_COLUMNS as EXPORT_COLUMNS  # the tests read it
from memory_core.sessions.sql.reads import EXPORT_ORDER as EXPORT_ORDER
from memory_core.user_keys import check_user_key

MAX_LINE_BYTES = 4 << 20
LATEST_TIMESTAMP = 253_402_300_800.0  # 10000-01-01T00:00:00Z
REQUIRED = ("session", "user", "platform", "chat", "chat_type", "role", "content", "timestamp")
OPTIONAL = ("name", "tool_name", "tool_calls", "tool_call_id")
_BATCH = 5000
PROCESS_MIN_BYTES = 1 << 20  # below this, parsing ends before a process would pay off
_PLATFORM = re.compile(r"[a-z0-9_]{1,32}")  # the platform rule of memory_core.user_keys
_BOT_SESSION = re.compile(r"mnemo:([0-9]{1,18}):([0-9][0-9.e+-]{0,30})")
_SURROGATE = re.compile("[\ud800-\udfff]")
_REQUIRED_KEYS = frozenset(REQUIRED)
_KNOWN_KEYS = frozenset(REQUIRED + OPTIONAL)
_USER_CACHE = 100_000  # user keys remembered as checked, per import


@dataclass(frozen=True)
class ImportResult:
    """What an import added."""

    lines: int
    sessions_created: int
    sessions_extended: int
    messages_inserted: int
    messages_skipped: int


def parse_timestamp(value: object) -> float:
    """Epoch seconds from a JSON number, a numeric string or ISO-8601 (naive means UTC).

    Only moments from 1970 to the end of year 9999 are accepted: anything else
    cannot be shown as a date later (export, search and recall would fail).
    """
    if isinstance(value, bool):
        raise ValueError("a boolean is not a timestamp")
    try:
        if isinstance(value, int | float):
            seconds = float(value)
        elif isinstance(value, str):
            seconds = _seconds_of_text(value)
        else:
            raise ValueError(f"{type(value).__name__} is not a timestamp")
    except (OverflowError, OSError):
        raise ValueError("timestamp is out of range") from None
    if not math.isfinite(seconds):
        raise ValueError("timestamp is not finite")
    if not 0 <= seconds < LATEST_TIMESTAMP:
        raise ValueError("timestamp is outside the years 1970 to 9999")
    return seconds


def _seconds_of_text(value: str) -> float:
    if value[4:5] == "-":  # looks like ISO-8601 (no number has "-" there but "123e-5")
        with contextlib.suppress(ValueError):
            return _iso_seconds(value)
    try:
        return float(value)
    except ValueError:
        pass
    return _iso_seconds(value)


def _iso_seconds(value: str) -> float:
    moment = datetime.fromisoformat(value.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def parse_line(
    text: str, line: int, users: set[str] | None = None, *, from_utf8: bool = False
) -> dict[str, object]:
    """Decode and validate one line; raise ImportFormatError naming the line.

    `users` holds user keys already found well-formed (a cache the caller
    keeps across lines; a key is checked once per import, not once per line).
    `from_utf8`: `text` was decoded from strict UTF-8, which holds no
    surrogate, so only a \\u escape can bring one in.
    """
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(line, f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise ImportFormatError(line, "nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise ImportFormatError(line, f"not valid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise ImportFormatError(line, "a line must hold one JSON object")
    if not record.keys() >= _REQUIRED_KEYS:
        missing = [k for k in REQUIRED if k not in record]
        raise ImportFormatError(line, f"missing {', '.join(missing)}")
    if not record.keys() <= _KNOWN_KEYS:
        unknown = sorted(set(record) - _KNOWN_KEYS)
        raise ImportFormatError(line, f"unknown key {unknown[0][:40]!r}")
    # A lone surrogate comes from a \u escape, or from text handed over as str.
    _check_strings(record, line, surrogates="\\u" in text or not (from_utf8 or text.isascii()))
    _check_user(str(record["user"]), line, users)
    if not _PLATFORM.fullmatch(str(record["platform"])):
        raise ImportFormatError(line, "'platform' must be lowercase letters, digits and _")
    try:
        record["timestamp"] = parse_timestamp(record["timestamp"])
    except ValueError as exc:
        shown = repr(record["timestamp"])[:60]
        raise ImportFormatError(line, f"bad timestamp {shown} ({exc})") from None
    return record


def _check_user(user: str, line: int, users: set[str] | None) -> None:
    if users is not None and user in users:
        return
    try:
        check_user_key(user)
    except InvalidUserKeyError as exc:
        raise ImportFormatError(line, f"'user': {exc}") from None
    if users is not None and len(users) < _USER_CACHE:
        users.add(user)


def _check_strings(record: dict[str, object], line: int, *, surrogates: bool = True) -> None:
    for key in ("session", "user", "platform", "chat"):
        value = record[key]
        if not isinstance(value, str) or not value.strip():
            raise ImportFormatError(line, f"{key!r} must be a non-empty string")
    if record["chat_type"] not in CHAT_TYPES:
        shown = repr(record["chat_type"])[:40]
        raise ImportFormatError(line, f"'chat_type' must be private or group, not {shown}")
    if record["role"] not in ROLES:
        shown = repr(record["role"])[:40]
        raise ImportFormatError(line, f"'role' must be user or assistant, not {shown}")
    if not isinstance(record["content"], str):
        raise ImportFormatError(line, "'content' must be a string")
    for key in OPTIONAL:
        if record.get(key) is not None and not isinstance(record[key], str):
            raise ImportFormatError(line, f"{key!r} must be a string")
    if not surrogates:
        return
    for key, value in record.items():
        if isinstance(value, str) and _SURROGATE.search(value):
            raise ImportFormatError(line, f"{key!r} holds a lone surrogate (not valid Unicode)")


def fingerprint(role: str, timestamp: float, content: str, name: object) -> str:
    """Identity of an imported message, for re-imports into an existing session."""
    key = f"{role}\0{round(timestamp * 1000)}\0{name or ''}\0{content}"
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


class Message(NamedTuple):
    """One checked line, as the importer writes it."""

    line: int
    head: tuple[str, str, str, str, str]  # platform, user, session, chat, chat type
    role: str
    content: str
    timestamp: float
    name: str | None
    tool_name: str | None
    tool_calls: str | None
    tool_call_id: str | None


Batch = tuple[list[Message], int]  # the messages and the number of lines they came from
_END = object()


def parsed_batches(
    lines: Iterable[bytes | str] | IO[bytes], *, process_min_bytes: int = PROCESS_MIN_BYTES
) -> Iterator[Batch]:
    """Checked messages in batches, parsed while the caller writes; errors re-raised here.

    A regular file of at least `process_min_bytes` is parsed in a forked
    process when this one runs no other thread (a thread would share the GIL
    with the writer, and parsing is most of an import's Python time);
    anything else on a helper thread. A bad line raises `ImportFormatError`.
    """
    if _forkable(lines, process_min_bytes):
        return _process_batches(cast(IO[bytes], lines))
    return _thread_batches(lines)


def _checked_batches(lines: Iterable[bytes | str] | IO[bytes]) -> Iterator[_Rows]:
    """Checked lines as plain tuples in `Message` order (cheap to build and to pickle)."""
    users: set[str] = set()
    heads: dict[_Head, _Head] = {}
    batch: list[tuple[object, ...]] = []
    consumed = 0
    for number, raw in enumerate(_lines_of(lines), start=1):
        text = _decode(raw, number)
        consumed += 1
        if text and not text.isspace():
            r = parse_line(text, number, users, from_utf8=isinstance(raw, bytes))
            head = (r["platform"], r["user"], r["session"], r["chat"], r["chat_type"])
            head = heads.setdefault(head, head)  # type: ignore[arg-type]  # one object per session
            get = r.get
            batch.append((number, head, r["role"], r["content"], r["timestamp"], get("name"),
                          get("tool_name"), get("tool_calls"), get("tool_call_id")))  # fmt: skip
        if consumed >= _BATCH:
            yield batch, consumed
            batch, consumed = [], 0
            if len(heads) > _USER_CACHE:
                heads.clear()
    yield batch, consumed


_Head = tuple[str, str, str, str, str]
_Rows = tuple[list[tuple[object, ...]], int]


def _messages(rows: list[tuple[object, ...]]) -> list[Message]:
    make = Message._make
    return [make(row) for row in rows]


def _thread_batches(lines: Iterable[bytes | str] | IO[bytes]) -> Iterator[Batch]:
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
            for rows, consumed in _checked_batches(lines):
                if not send((_messages(rows), consumed)):
                    return
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
            yield cast(Batch, item)
    finally:
        stop.set()
        worker.join()


def _forkable(lines: object, min_bytes: int) -> bool:
    if not isinstance(lines, io.IOBase) or threading.active_count() != 1:
        return False
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    try:
        status = os.fstat(lines.fileno())
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(status.st_mode) and status.st_size >= min_bytes


def _process_batches(lines: IO[bytes]) -> Iterator[Batch]:
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(
        target=_parse_in_child, args=(lines, send, receive), name="mnemo-import-parser"
    )
    child.daemon = True
    child.start()
    send.close()
    try:
        while True:
            try:
                item = receive.recv()
            except EOFError:
                child.join(5)
                raise SessionStoreError(
                    f"the import's parser process stopped (exit code {child.exitcode})"
                ) from None
            if item[0] == "batch":
                yield _messages(item[1]), item[2]
            elif item[0] == "bad":
                raise ImportFormatError(item[1], item[2])
            elif item[0] == "failed":
                raise SessionStoreError(f"the import's parser failed: {item[1]}")
            else:
                return
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join()


def _parse_in_child(lines: IO[bytes], send: Connection, receive: Connection) -> None:
    """The forked parser: batches down the pipe, then "end", or what went wrong."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the importing process's to handle
    receive.close()  # so that a send fails once the importing process is gone
    _close_fds_except({0, 1, 2, send.fileno(), lines.fileno()})  # the import lock among them
    try:
        for rows, consumed in _checked_batches(lines):
            send.send(("batch", rows, consumed))  # plain tuples: a named tuple pickles 4x slower
        send.send(("end",))
    except ImportFormatError as exc:
        _send_quietly(send, ("bad", exc.line, exc.problem))
    except OSError:
        return  # the importing process is gone
    except BaseException as exc:  # handed to the importing process, which raises it
        _send_quietly(send, ("failed", f"{type(exc).__name__}: {exc}"))


def _send_quietly(send: Connection, item: tuple[object, ...]) -> None:
    with contextlib.suppress(OSError):
        send.send(item)


def _close_fds_except(keep: set[int]) -> None:
    """Close every inherited descriptor but `keep`: the child must hold no lock of the parent's."""
    try:
        open_fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = list(range(3, 1024))
    for fd in open_fds:
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _lines_of(lines: Iterable[bytes | str] | IO[bytes]) -> Iterator[bytes | str]:
    """The lines, each at most `MAX_LINE_BYTES` long: a file is read with a bounded readline."""
    if not isinstance(lines, io.IOBase):
        for number, raw in enumerate(lines, start=1):
            if len(raw) > MAX_LINE_BYTES + 2:  # a str counts characters, a little lenient
                raise ImportFormatError(number, f"longer than {MAX_LINE_BYTES >> 20} MiB")
            yield raw
        return
    number = 0
    while raw := lines.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            raise ImportFormatError(number, f"longer than {MAX_LINE_BYTES >> 20} MiB")
        yield raw


def _decode(raw: bytes | str, line: int) -> str:
    if isinstance(raw, str):
        return raw.removeprefix("\ufeff") if line == 1 else raw
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(line, f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    return text.removeprefix("\ufeff") if line == 1 else text


def bot_session_id(session_id: int, started_at: float) -> str:
    """The external id an export gives a session the bot created (it has none of its own).

    The row id alone would collide with another database's session; with the
    exact start time (``repr`` round-trips a float) it names one session.
    """
    return f"mnemo:{session_id}:{started_at!r}"


def parse_bot_session_id(external_id: str) -> tuple[int, float] | None:
    """The row id and start time in a `bot_session_id`, or None for any other id."""
    match = _BOT_SESSION.fullmatch(external_id)
    if match is None:
        return None
    try:
        return int(match.group(1)), float(match.group(2))
    except ValueError:
        return None


def export_lines(conn: sqlite3.Connection, user_key: str) -> Iterable[str]:
    """Every message of one person, in the import format, one JSON line each (no newline)."""
    for row in conn.execute(EXPORT.sqlite, (user_key,)):
        yield export_line(row)


def export_line(row: Sequence[Any]) -> str:
    """One message row read with `sql.reads.EXPORT_COLUMNS` as an import-format JSON line."""
    external_id, session_id, started_at, *rest = row
    name = external_id if external_id is not None else bot_session_id(session_id, started_at)
    record: dict[str, object] = dict(zip(REQUIRED, [name, *rest[:7]], strict=True))
    record["timestamp"] = datetime.fromtimestamp(float(rest[6]), UTC).isoformat()
    for key, value in zip(OPTIONAL, rest[7:], strict=True):
        if value is not None:
            record[key] = value
    return json.dumps(record, ensure_ascii=False)

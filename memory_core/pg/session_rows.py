"""The PostgreSQL session tables as plain rows: a move's copy in, its listing out, a check.

`copy_rows` writes rows listed by `memory_core.sessions.dump` (state.db's
sessions, messages and inbox, ids kept) into empty tables with ``COPY``, inside
the caller's transaction (a move's one transaction, see `memory_core.pg.move`):
every column as it was, the stored prompts, the review counters and the
extraction progress included, so a moved bot resumes with the same prompt
bytes. What PostgreSQL derives itself is derived here too: `owner_token` from
the user key, `words` and `symbols` from the content (as a live write does), and
`message_count` by the schema's insert trigger. Each identity sequence is then
moved past the highest id copied.

`table_rows` lists the same tables back in the same column order and types as
`dump.table_rows` (flags as 0 or 1), inside one repeatable-read snapshot, so a
digest over the two listings compares what both backends hold; `rows_on` lists
them on a connection already in a transaction (the move's, before it commits).
`check_rows` looks for what a store must never hold: a wrong message count, an
owner token that is not the user key's, a message whose `words` or `symbols` is
not what its content gives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any

from memory_core.pg.blocking import SyncConnection
from memory_core.pg.database import Connection, PgDatabase
from memory_core.pg.search_text import index_documents
from memory_core.pg.session_import import symbols_value
from memory_core.sessions.dump import COLUMNS
from memory_core.sessions.sql.edits import (
    FLAG_COLUMNS,
    WRONG_MESSAGE_COUNTS,
    counted_rows,
    listed_rows,
)
from memory_core.sessions.word_index import owner_token

__all__ = [
    "TABLES",
    "check_rows",
    "copy_rows",
    "counts_on",
    "row_count",
    "rows_on",
    "schema_records",
    "table_rows",
]

TABLES = ("sessions", "messages", "inbox")  # in the order they are copied
CHUNK_ROWS = 5000
_COUNT = COLUMNS["sessions"].index("message_count")
_USER = COLUMNS["sessions"].index("user_key")
_ROLE, _CONTENT = COLUMNS["messages"].index("role"), COLUMNS["messages"].index("content")
_TIME, _SPEAKER = COLUMNS["messages"].index("timestamp"), COLUMNS["messages"].index("speaker_name")


def _select(table: str) -> str:
    return listed_rows(table, COLUMNS[table], FLAG_COLUMNS.get(table, ()))


async def row_count(db: PgDatabase, table: str) -> int:
    """How many rows `table` holds (one of `TABLES`)."""
    if table not in COLUMNS:
        raise KeyError(table)
    async with db.connection() as conn:
        row = await (await conn.execute(counted_rows(table))).fetchone()
    return int(row[0]) if row else 0


async def schema_records(db: PgDatabase) -> list[tuple[str, int, str]]:
    """(component, version, sha256) of every migration `mnemo_schema` records."""
    async with db.connection() as conn:
        found = await (await conn.execute("SELECT to_regclass('mnemo_schema')")).fetchone()
        if found is None or found[0] is None:
            return []
        cur = await conn.execute("SELECT component, version, sha256 FROM mnemo_schema")
        return [(str(c), int(v), str(h)) for c, v, h in await cur.fetchall()]


async def table_rows(db: PgDatabase) -> AsyncIterator[tuple[str, tuple[Any, ...]]]:
    """(table, row) for every row of `TABLES`, in table then id order, in one snapshot."""
    async with db.transaction("repeatable read") as conn:
        for table in TABLES:
            async with conn.cursor(name=f"mnemo_list_{table}") as cur:
                cur.itersize = CHUNK_ROWS
                await cur.execute(_select(table))
                async for row in cur:
                    yield table, tuple(row)


def counts_on(conn: SyncConnection) -> dict[str, int]:
    """How many rows each of `TABLES` holds, as `conn`'s transaction sees them."""
    counts = {}
    for table in TABLES:
        row = conn.execute(counted_rows(table)).fetchone()
        counts[table] = int(row[0]) if row else 0
    return counts


def rows_on(conn: SyncConnection) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """`table_rows` on `conn`, inside the transaction it is in (its own writes seen)."""
    for table in TABLES:
        with conn.cursor(name=f"mnemo_list_{table}") as cur:
            cur.itersize = CHUNK_ROWS
            cur.execute(_select(table))
            for row in cur:
                yield table, tuple(row)


def copy_rows(conn: SyncConnection, rows: Iterable[tuple[str, Sequence[Any]]]) -> dict[str, int]:
    """COPY (table, row) pairs, tables in `TABLES` order, into the empty tables, within
    `conn`'s transaction (the caller commits); the counts."""
    copied = dict.fromkeys(TABLES, 0)
    pending: list[Sequence[Any]] = []
    current = ""
    for table, row in rows:
        if table != current or len(pending) >= CHUNK_ROWS:
            _copy_chunk(conn, current, pending)
            pending, current = [], table
        pending.append(row)
        copied[table] += 1
    _copy_chunk(conn, current, pending)
    for table in TABLES:  # the next id a live write takes is past every copied one
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) "
            f"FROM {table} HAVING max(id) IS NOT NULL"
        )
    return copied


def _copy_chunk(conn: SyncConnection, table: str, rows: list[Sequence[Any]]) -> None:
    if not rows:
        return
    columns = list(COLUMNS[table])
    if table == "sessions":  # counted again by the insert trigger as the messages come in
        columns.append("owner_token")
        out = [(*r[:_COUNT], 0, *r[_COUNT + 1 :], owner_token(r[_USER])) for r in rows]
    elif table == "messages":
        columns += ["words", "symbols"]
        words = index_documents([(r[_ROLE], r[_CONTENT], r[_TIME], r[_SPEAKER]) for r in rows])
        pairs = zip(rows, words, strict=True)
        out = [(*r, w, symbols_value(r[_ROLE], r[_CONTENT])) for r, w in pairs]
    else:
        out = [tuple(r) for r in rows]
    flags = {columns.index(c) for c in FLAG_COLUMNS.get(table, ())}
    statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
    with conn.cursor() as cur, cur.copy(statement) as copy:
        for row in out:
            copy.write_row([bool(v) if i in flags else v for i, v in enumerate(row)])


_CHECKS = {
    "message counts": WRONG_MESSAGE_COUNTS.postgres,
    "lineage roots": "SELECT count(*) FROM sessions WHERE root_id IS NULL",
}


async def check_rows(db: PgDatabase, *, sample: int | None = None) -> dict[str, int]:
    """{what: how many rows are wrong} for each check, 0 everywhere on a sound store.

    `sample`: check the words and symbols of that many messages, taken at
    random, rather than of every message.
    """
    found: dict[str, int] = {}
    async with db.connection() as conn:
        for name, sql in _CHECKS.items():
            row = await (await conn.execute(sql)).fetchone()
            found[name] = int(row[0]) if row else 0
        cur = await conn.execute("SELECT user_key, owner_token FROM sessions")
        found["owner tokens"] = sum(owner_token(u) != t for u, t in await cur.fetchall())
        found["message words"], found["message symbols"] = await _check_words(conn, sample)
    return found


async def _check_words(conn: Connection, sample: int | None) -> tuple[int, int]:
    some = "" if sample is None else f" ORDER BY random() LIMIT {int(sample)}"
    cur = conn.cursor()  # client-side: every row is here before the checks below run
    await cur.execute(
        f"SELECT id, role, content, symbols, timestamp, speaker_name FROM messages{some}"
    )
    words_wrong = symbols_wrong = 0
    while batch := await cur.fetchmany(CHUNK_ROWS):
        ids = [r[0] for r in batch]
        words = index_documents([(r[1], r[2], r[4], r[5]) for r in batch])
        symbols_wrong += sum(r[3] != symbols_value(r[1], r[2]) for r in batch)
        other = await conn.execute(
            "SELECT count(*) FROM unnest(%s::bigint[], %s::text[]) AS t(id, w) "
            "JOIN messages m USING (id) WHERE m.words IS DISTINCT FROM t.w::tsvector",
            (ids, words),
        )
        row = await other.fetchone()
        words_wrong += int(row[0]) if row else 0
    return words_wrong, symbols_wrong

"""Person records on PostgreSQL: rows of `person_records`, one per (person, name).

`PgRecord` reads and writes one record on the connection of the transaction
that holds the person's `memory_versions` row lock (`PgMemoryStore.person_record`),
so its changes commit, or roll back, with that block.
"""

from __future__ import annotations

from memory_core.pg.blocking import SyncConnection


class PgRecord:
    """One person's record `name`, inside a transaction that holds their lock."""

    def __init__(self, conn: SyncConnection, user_key: str, name: str) -> None:
        self._conn = conn
        self._key = (user_key, name)

    def read(self) -> str | None:
        return read_record(self._conn, *self._key)

    def write(self, text: str) -> None:
        self._conn.execute(
            "INSERT INTO person_records (user_key, name, body) VALUES (%s, %s, %s)"
            " ON CONFLICT (user_key, name) DO UPDATE SET body = excluded.body",
            (*self._key, text),
        )

    def delete(self) -> None:
        self._conn.execute(
            "DELETE FROM person_records WHERE user_key = %s AND name = %s", self._key
        )


def read_record(conn: SyncConnection, user_key: str, name: str) -> str | None:
    row = conn.execute(
        "SELECT body FROM person_records WHERE user_key = %s AND name = %s", (user_key, name)
    ).fetchone()
    return None if row is None else str(row[0])


def record_names(conn: SyncConnection, user_key: str) -> list[str]:
    cur = conn.execute("SELECT name FROM person_records WHERE user_key = %s", (user_key,))
    return sorted(str(name) for (name,) in cur.fetchall())

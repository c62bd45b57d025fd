"""Deliveries seen: a command or a button press delivered twice runs once.

A platform may deliver one update twice: the same Telegram update POSTed to two
webhook replicas on one database, or fetched again after a restart. A person's
message is kept once by its platform id, but commands and button presses are
never stored, so the store keeps a record of their delivery instead:
`SessionBackend.first_delivery(platform, delivery)` records one and says whether
it was the first time. The caller's `delivery` names it (a chat, a message, a
person, a payload); the record holds only `delivery_digest`, the sha256 of the
platform and that text, with the time it was seen, never the ids themselves: a
person's erasure has nothing of theirs to remove here.

A record is kept `KEEP` seconds (two days: longer than any platform delivers an
update again). Pruning costs nothing extra to find: every `PRUNE_EVERY`-th record
a store makes, its first one too (`PruneTurns`), deletes the older records in the
same transaction, through an index on the time.

This module holds the SQLite statements (table ``deliveries``, schema v12);
`memory_core.pg.session_deliveries` holds PostgreSQL's.
"""

from __future__ import annotations

import hashlib
import sqlite3

from memory_core.sessions.connection import transaction
from memory_core.sessions.sql.writes import PRUNE_DELIVERIES

KEEP = 2 * 24 * 3600.0  # seconds a delivery is remembered
PRUNE_EVERY = 100  # one record in this many (per store) prunes the old ones


def delivery_digest(platform: str, delivery: str) -> bytes:
    """The 32 bytes a delivery is recorded as: sha256 of the platform and the key."""
    text = f"{platform}\x00{delivery}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class PruneTurns:
    """Says when a store's record of a delivery also prunes: its first, then every
    `every`-th. Called from the event loop only, so it needs no lock."""

    def __init__(self, every: int = PRUNE_EVERY) -> None:
        self._every = max(1, every)
        self._calls = 0

    def due(self) -> bool:
        """Whether this record prunes (counts the record)."""
        due = self._calls % self._every == 0
        self._calls += 1
        return due


def first_delivery(conn: sqlite3.Connection, digest: bytes, now: float, prune: bool) -> bool:
    """Record the delivery `digest` seen at `now`; whether it was not recorded yet.
    `prune`: first delete the records older than `KEEP`, in the same transaction."""
    with transaction(conn):
        if prune:
            conn.execute(PRUNE_DELIVERIES.sqlite, (now - KEEP,))
        cursor = conn.execute(
            "INSERT INTO deliveries (digest, seen_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (digest, now),
        )
    return cursor.rowcount == 1

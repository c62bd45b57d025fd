"""PostgreSQL's record of deliveries seen (`memory_core.sessions.deliveries`).

One statement records a delivery and answers whether it was the first: its
insert, or else the claim of the row already there. Every call brings a claim
of its own (16 random bytes), so a call whose commit went through but whose
answer was lost with its connection, and which `PgDatabase.transact` runs
again, finds its own row and still counts as the first, not as a duplicate of
itself; of two replicas given one delivery at once, the unique digest lets one
insert and the other finds a claim not its own (or, while that insert has not
committed, no row it can see): only one runs it.
"""

from __future__ import annotations

from memory_core.pg.database import Connection
from memory_core.sessions.deliveries import KEEP
from memory_core.sessions.sql.writes import PRUNE_DELIVERIES

_RECORD = """
WITH inserted AS (
    INSERT INTO deliveries (digest, claim, seen_at) VALUES (%s, %s, %s)
    ON CONFLICT (digest) DO NOTHING RETURNING claim
)
SELECT claim FROM inserted
UNION ALL
SELECT claim FROM deliveries WHERE digest = %s
LIMIT 1
"""


async def first_delivery(
    conn: Connection, digest: bytes, claim: bytes, now: float, prune: bool
) -> bool:
    """Record the delivery `digest` seen at `now` under `claim`; whether the record is
    this claim's. `prune`: first delete the records older than `KEEP`."""
    if prune:
        await conn.execute(PRUNE_DELIVERIES.postgres, (now - KEEP,))
    cursor = await conn.execute(_RECORD, (digest, claim, now, digest))
    row = await cursor.fetchone()
    return row is not None and bytes(row[0]) == claim

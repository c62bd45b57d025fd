"""Versioned schema migrations on PostgreSQL, frozen by their sha256.

Each store names its component ("sessions", "memory", …) and lists its steps,
`PgMigration(component, version, sql)`, versions 1, 2, 3, … in order; a step
may also run Python after its SQL (`then`, in the same transaction: a value
only Python can compute, such as a tsvector), which its SQL text names. The table
`mnemo_schema(component, version, sha256, applied_at)` records every step a
database has run, with the sha256 of its SQL text. `apply_migrations`:

- takes a session-level advisory lock (`LOCK_KEY`), so that of several
  processes starting at once one migrates and the others wait, then find
  nothing left to do;
- refuses the database (`PostgresSchemaError`) when a recorded step's sha256
  differs from the code's step of that version (a step was edited after it
  ran: change a schema by adding a step, never by editing one), or when a
  component is recorded at a version newer than the code's newest;
- runs each missing step in its own transaction together with its row in
  `mnemo_schema`, so a failure leaves the previous version intact.

Components the code does not list are left alone (another store's schema).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import Connection

from memory_core.errors import PostgresSchemaError, PostgresUnavailableError

# The advisory lock every Mnemo migration holds: the first 8 bytes of
# sha256("mnemo_schema") as a signed 64-bit number.
LOCK_KEY = int.from_bytes(hashlib.sha256(b"mnemo_schema").digest()[:8], "big", signed=True)

_CREATE_TABLE = b"""
CREATE TABLE IF NOT EXISTS mnemo_schema (
    component TEXT NOT NULL,
    version INTEGER NOT NULL CHECK (version > 0),
    sha256 TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
)
"""


@dataclass(frozen=True)
class PgMigration:
    """One step of a component's schema: its version and its SQL text."""

    component: str
    version: int
    sql: str
    then: Callable[[Connection[Any]], None] | None = field(default=None, compare=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def plan(steps: Sequence[PgMigration]) -> dict[str, list[PgMigration]]:
    """The steps by component, each list in version order; a gap or repeat is a bug."""
    by_component: dict[str, list[PgMigration]] = {}
    for step in steps:
        by_component.setdefault(step.component, []).append(step)
    for component, listed in by_component.items():
        listed.sort(key=lambda s: s.version)
        versions = [s.version for s in listed]
        if versions != list(range(1, len(listed) + 1)):
            raise ValueError(f"{component} migrations must be numbered 1, 2, 3…: {versions}")
    return by_component


def check_recorded(component: str, steps: list[PgMigration], recorded: dict[int, str]) -> None:
    """Refuse a database whose record of `component` disagrees with `steps`."""
    newest = steps[-1].version
    beyond = [v for v in recorded if v > newest]
    if beyond:
        raise PostgresSchemaError(
            f"the database's {component} schema is at version {max(beyond)}, newer than "
            f"this Mnemo's {newest}: upgrade Mnemo"
        )
    for step in steps:
        digest = recorded.get(step.version)
        if digest is not None and digest != step.sha256:
            raise PostgresSchemaError(
                f"{component} migration v{step.version} differs from the one this database "
                f"ran (sha256 {digest}, code {step.sha256}): migrations are frozen"
            )


def _recorded(conn: Connection[Any], component: str) -> dict[int, str]:
    cur = conn.execute(
        "SELECT version, sha256 FROM mnemo_schema WHERE component = %s", (component,)
    )
    return {int(version): str(digest) for version, digest in cur.fetchall()}


def _apply(conn: Connection[Any], step: PgMigration) -> None:
    with conn.transaction():
        conn.execute(step.sql.encode("utf-8"))  # no parameters: several statements
        if step.then is not None:
            step.then(conn)
        conn.execute(
            "INSERT INTO mnemo_schema (component, version, sha256) VALUES (%s, %s, %s)",
            (step.component, step.version, step.sha256),
        )


def apply_migrations(conn: Connection[Any], steps: Sequence[PgMigration]) -> dict[str, int]:
    """Run the missing `steps` on the synchronous autocommit `conn`; {component: version now}.

    The async `PgDatabase` calls it in a worker thread on a connection of its own."""
    by_component = plan(steps)
    conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
    try:
        conn.execute(_CREATE_TABLE)
        versions: dict[str, int] = {}
        for component, listed in by_component.items():
            recorded = _recorded(conn, component)
            check_recorded(component, listed, recorded)
            for step in listed:
                if step.version not in recorded:
                    _apply(conn, step)
            versions[component] = listed[-1].version
        return versions
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))


def migrate_url(url: str, steps: Sequence[PgMigration], connect_timeout: float) -> dict[str, int]:
    """`apply_migrations` on a connection of its own to `url`, closed after."""
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, round(connect_timeout)))
    except psycopg.OperationalError as err:
        raise PostgresUnavailableError(f"no connection to PostgreSQL: {err}") from err
    with conn:
        return apply_migrations(conn, steps)

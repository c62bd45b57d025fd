"""The PostgreSQL backend's foundations: a connection pool and versioned migrations.

`PgDatabase` pools connections to one database, runs transactions (retried on
serialization failures and deadlocks through `transact`) and applies each
store's `PgMigration` steps, recorded and frozen by sha256 in `mnemo_schema`.
Only the modules of this package import psycopg.
"""

from memory_core.errors import (
    PostgresConflictError,
    PostgresError,
    PostgresSchemaError,
    PostgresUnavailableError,
)
from memory_core.pg.database import PgDatabase
from memory_core.pg.migrations import PgMigration

__all__ = [
    "PgDatabase",
    "PgMigration",
    "PostgresConflictError",
    "PostgresError",
    "PostgresSchemaError",
    "PostgresUnavailableError",
]

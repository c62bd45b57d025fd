"""The stores of both backends, for the tests of this folder that take either."""

from tests.memory_core.pg.memory_backends import memory_backend
from tests.memory_core.pg.session_stores import clock, pg_db, pg_store, sqlite_store, store

__all__ = ["clock", "memory_backend", "pg_db", "pg_store", "sqlite_store", "store"]

"""The test PostgreSQL: an empty schema per test, with pg_trgm reachable."""

from __future__ import annotations

import psycopg


def _schema(conn: psycopg.Connection[tuple[object, ...]]) -> str:
    row = conn.execute("SELECT current_schema()").fetchone()
    assert row is not None
    return str(row[0])


def test_a_test_schema_is_empty_and_has_pg_trgm(pg_database: str) -> None:
    with psycopg.connect(pg_database, autocommit=True) as conn:
        schema = _schema(conn)
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchone()
        assert tables == (0,)
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")  # a store's migration does this
        row = conn.execute("SELECT similarity('memory', 'memories') > 0.3").fetchone()
        assert row == (True,)


def test_each_test_gets_its_own_schema_and_it_is_dropped(pg_database: str) -> None:
    with psycopg.connect(pg_database, autocommit=True) as conn:
        schema = _schema(conn)
        conn.execute("CREATE TABLE t (x int)")
        found = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename = 't'", (schema,)
        ).fetchone()
    assert schema.startswith("t_") and found == (1,)


def test_a_fresh_database_is_a_database_of_its_own(pg_url: str, fresh_database: str) -> None:
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
    assert name is not None and name[0].startswith("mnemo_test_")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        listed = conn.execute("SELECT datname FROM pg_database WHERE datname = %s", name).fetchall()
    assert listed == [name]

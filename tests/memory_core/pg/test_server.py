"""The test PostgreSQL: a fresh database per test, with pg_trgm."""

from __future__ import annotations

import psycopg


def test_a_test_database_is_empty_and_has_pg_trgm(pg_database: str) -> None:
    with psycopg.connect(pg_database, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()
        assert tables == (0,)
        conn.execute("CREATE EXTENSION pg_trgm")
        row = conn.execute("SELECT similarity('memory', 'memories') > 0.3").fetchone()
        assert row == (True,)


def test_each_test_gets_its_own_database(pg_url: str, pg_database: str) -> None:
    with psycopg.connect(pg_database, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        conn.execute("CREATE TABLE t (x int)")
    assert name is not None and name[0].startswith("mnemo_test_")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        listed = conn.execute("SELECT datname FROM pg_database WHERE datname = %s", name).fetchall()
    assert listed == [name]

"""One text for the SQL both session stores run, and the dialect that renders it.

Django's database backends are the model: a statement the two backends share
is written once, here, with SQLite's ``?`` placeholders and named fragments
(``{for_update}``, ``{greatest}`` ...); a `Dialect` renders it for SQLite or
for PostgreSQL (``%s`` placeholders, a literal ``%`` doubled). What truly
differs between the two, and only that, is the dialect's job:

- placeholders, and a list parameter (``IN (?, ?)`` on SQLite, ``= ANY(%s)``
  with one array on PostgreSQL: `Dialect.any_of`, `Dialect.none_of`);
- ``IS NOT`` against ``IS DISTINCT FROM``; ``max``/``greatest`` of two values;
  ``length``/``char_length``; a row lock (``FOR UPDATE``, nothing on SQLite,
  whose writer holds the database).

`Statement` renders a constant statement for both dialects once, at import;
statements built per call (a scope, a list) are functions taking a `Dialect`.
Full-text search, the schema and bulk loading are each backend's own.

The scope filter (`scope_sql`, `ScopeFilter`) lives here once: it is what keeps
one person's conversations from another's, on either backend.
"""

from memory_core.sessions.sql.dialect import (
    DIALECTS,
    POSTGRES,
    SQLITE,
    Dialect,
    Statement,
    placeholders,
)
from memory_core.sessions.sql.scope import ScopeFilter, scope_sql

__all__ = [
    "DIALECTS",
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "ScopeFilter",
    "Statement",
    "placeholders",
    "scope_sql",
]

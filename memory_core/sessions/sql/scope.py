"""The scope filter of both session stores, written once: a person's sessions only.

What keeps one person's conversations from another's, on either backend; every
read that returns message or prompt text, and every search statement, carries it.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_core.scopes import SearchScope
from memory_core.sessions.models import INTERNAL_SOURCES, SearchOptions
from memory_core.sessions.sql.dialect import Dialect
from memory_core.sessions.word_index import owner_token


def scope_sql(dialect: Dialect, scope: SearchScope, alias: str = "s") -> tuple[str, list[object]]:
    """The SQL condition (and its parameters) that confines session rows to `scope`.

    A person's sessions only, optionally one chat; a session of a thread matches
    only a scope of that thread, and a scope outside threads no session held in
    one (an empty stored thread id counts as none, as it does in the session key).
    """
    p = dialect.param
    sql = f"{alias}.user_key = {p}"
    params: list[object] = [scope.user_key]
    if scope.chat_id is not None:
        sql += f" AND {alias}.chat_id = {p}"
        params.append(scope.chat_id)
    if scope.thread_id is not None:
        sql += f" AND {alias}.thread_id = {p}"
        params.append(scope.thread_id)
    elif scope.outside_threads:
        sql += f" AND coalesce({alias}.thread_id, '') = ''"
    return sql, params


@dataclass(frozen=True)
class ScopeFilter:
    """The WHERE clause every search statement shares (alias `s` sessions, `m` messages).

    `sessions_sql` holds the conditions on sessions only (scope, sources,
    lineage); `sql` adds the options' window on message times. Internal sources
    (review, extraction) are left out unless asked for, and so is the lineage of
    `exclude_lineage_of`.
    """

    sessions_sql: str
    sessions_params: tuple[object, ...]
    sql: str
    params: tuple[object, ...]
    owner: str
    max_hits: int
    exclude_lineage_of: int | None = None

    @classmethod
    def build(cls, dialect: Dialect, scope: SearchScope, options: SearchOptions) -> ScopeFilter:
        where, params = scope_sql(dialect, scope, "s")
        parts = [where]
        p = dialect.param
        if not options.include_internal:
            sql, more = dialect.none_of("s.source", INTERNAL_SOURCES)
            parts.append(sql)
            params.extend(more)
        if options.exclude_lineage_of is not None:
            parts.append(
                f"s.root_id {dialect.is_not} (SELECT x.root_id FROM sessions x WHERE x.id = {p})"
            )
            params.append(int(options.exclude_lineage_of))
        session_parts, session_params = list(parts), tuple(params)
        if options.since is not None:
            parts.append(f"m.timestamp >= {p}")
            params.append(float(options.since))
        if options.until is not None:
            parts.append(f"m.timestamp < {p}")
            params.append(float(options.until))
        return cls(
            " AND ".join(session_parts),
            session_params,
            " AND ".join(parts),
            tuple(params),
            owner_token(scope.user_key),
            max(1, options.max_hits_per_term),
            options.exclude_lineage_of,
        )

"""The scope filter of the session store in PostgreSQL's SQL (`%s` parameters).

The same rules as SQLite's `reads.scope_sql` and `matching.ScopeFilter`: a
person's sessions only, optionally one chat; a scope of a thread sees that
thread only, a scope outside threads no session held in a thread (an empty
stored thread id counts as none); internal sources (review, extraction) left
out unless asked for; the lineage of `exclude_lineage_of` left out; the
options' window on message times. Aliases: `s` for sessions, `m` for messages.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_core.scopes import SearchScope
from memory_core.sessions.models import INTERNAL_SOURCES, SearchOptions


def scope_sql(scope: SearchScope, alias: str = "s") -> tuple[str, list[object]]:
    """The SQL condition (and its parameters) that confines session rows to `scope`."""
    sql = f"{alias}.user_key = %s"
    params: list[object] = [scope.user_key]
    if scope.chat_id is not None:
        sql += f" AND {alias}.chat_id = %s"
        params.append(scope.chat_id)
    if scope.thread_id is not None:
        sql += f" AND {alias}.thread_id = %s"
        params.append(scope.thread_id)
    elif scope.outside_threads:
        sql += f" AND coalesce({alias}.thread_id, '') = ''"
    return sql, params


@dataclass(frozen=True)
class PgScopeFilter:
    """The WHERE clause every search statement shares (alias `s` sessions, `m` messages).

    `sessions_sql` holds the conditions on sessions only (scope, sources,
    lineage); `sql` adds the time window on messages.
    """

    sessions_sql: str
    sessions_params: tuple[object, ...]
    sql: str
    params: tuple[object, ...]
    max_hits: int
    exclude_lineage_of: int | None = None

    @classmethod
    def build(cls, scope: SearchScope, options: SearchOptions) -> PgScopeFilter:
        where, params = scope_sql(scope, "s")
        parts = [where]
        if not options.include_internal:
            parts.append("s.source <> ALL(%s)")
            params.append(list(INTERNAL_SOURCES))
        if options.exclude_lineage_of is not None:
            parts.append(
                "s.root_id IS DISTINCT FROM (SELECT x.root_id FROM sessions x WHERE x.id = %s)"
            )
            params.append(int(options.exclude_lineage_of))
        session_parts, session_params = list(parts), tuple(params)
        if options.since is not None:
            parts.append("m.timestamp >= %s")
            params.append(float(options.since))
        if options.until is not None:
            parts.append("m.timestamp < %s")
            params.append(float(options.until))
        return cls(
            " AND ".join(session_parts),
            session_params,
            " AND ".join(parts),
            tuple(params),
            max(1, options.max_hits_per_term),
            options.exclude_lineage_of,
        )

"""The dialect that renders one shared statement for SQLite or PostgreSQL (see the package)."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from dataclasses import dataclass

_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Dialect:
    """What one backend writes differently; `sql` renders a shared template."""

    name: str
    param: str
    for_update: str  # appended to a SELECT that reads a row it will change
    greatest: str  # the larger of two values
    length: str  # characters in a text
    is_not: str  # NULL-safe "differs from"
    true: str  # a true value as a flag column holds it (1 in SQLite's INTEGER flags)
    returning_id: str  # an insert's new id as a row (SQLite reads `lastrowid` instead)

    @functools.cache  # noqa: B019 - two dialects, a bounded set of templates
    def sql(self, template: str) -> str:
        """`template` in this dialect: its fragments filled, its placeholders rendered."""
        fragments = {
            "for_update": self.for_update,
            "greatest": self.greatest,
            "length": self.length,
            "is_not": self.is_not,
            "true": self.true,
            "returning_id": self.returning_id,
        }
        text = _FIELD.sub(lambda m: fragments[m.group(1)], template)
        if self.param == "?":
            return text
        return text.replace("%", "%%").replace("?", self.param)

    def any_of(self, expr: str, values: Collection[object]) -> tuple[str, list[object]]:
        """`expr` is one of `values`: the condition and its parameters."""
        if self.param == "?":
            if not values:
                return "0", []
            return f"{expr} IN ({', '.join('?' * len(values))})", list(values)
        return f"{expr} = ANY({self.param})", [list(values)]

    def none_of(self, expr: str, values: Collection[object]) -> tuple[str, list[object]]:
        """`expr` is none of `values`: the condition and its parameters."""
        if self.param == "?":
            if not values:
                return "1", []
            return f"{expr} NOT IN ({', '.join('?' * len(values))})", list(values)
        return f"{expr} <> ALL({self.param})", [list(values)]


SQLITE = Dialect("sqlite", "?", "", "max", "length", "IS NOT", "1", "")
POSTGRES = Dialect(
    "postgresql",
    "%s",
    " FOR UPDATE",
    "greatest",
    "char_length",
    "IS DISTINCT FROM",
    "TRUE",
    " RETURNING id",
)
DIALECTS = (SQLITE, POSTGRES)


class Statement:
    """A constant statement both backends run, rendered for each once."""

    __slots__ = ("postgres", "sqlite", "template")

    def __init__(self, template: str) -> None:
        self.template = template
        self.sqlite = SQLITE.sql(template)
        self.postgres = POSTGRES.sql(template)

    def of(self, dialect: Dialect) -> str:
        return self.sqlite if dialect is SQLITE else self.postgres

    def __repr__(self) -> str:
        return f"Statement({self.template!r})"


def placeholders(dialect: Dialect, count: int) -> str:
    """``?, ?, ?`` (or ``%s, %s, %s``): the parameters of one VALUES row."""
    return ", ".join([dialect.param] * count)

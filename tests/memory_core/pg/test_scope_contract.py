"""Scope isolation, as a property, on both stores: nobody's search returns another
person's messages, a thread's messages come back only in that thread's scope, and
what a person may see is all found.

The scope filter is written once (`memory_core.sessions.sql.scope`) and rendered
for each backend; this runs the same drawn conversations through SQLite and
PostgreSQL. Examples share one store each and are kept apart by renaming their
people (`Example.suffix`), so a hit from another example fails like any leak.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings

from memory_core.scopes import SearchScope
from memory_core.sessions.backend import SessionBackend
from memory_core.sessions.models import NewMessage, SearchOptions
from tests.memory_core.sessions.scope_cases import (
    Example,
    Place,
    Written,
    matches,
    messages,
    queries,
    unmarked,
    visible,
)

_examples = itertools.count()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(written=messages, query_words=queries)
async def test_every_hit_belongs_to_the_searcher(
    store: SessionBackend, written: Written, query_words: list[str]
) -> None:
    example = Example(written, f"-x{next(_examples)}")
    where_is: dict[int, Place] = {}
    texts: dict[Place, set[str]] = {}
    for n, (place, origin, text) in enumerate(example.messages()):
        result = await store.append_message(
            origin=origin, message=NewMessage("user", text, float(n), key=f"{example.suffix}{n}")
        )
        where_is[result.session_id] = place
        texts.setdefault(place, set()).add(text)
    query = " ".join(query_words)
    for user in example.users:
        for scope in example.scopes_of(user):
            hits = await store.search(query, scope, SearchOptions(limit=100))
            unseen = set().union(*(t for p, t in texts.items() if not visible(scope, p)))
            for hit in hits:
                assert hit.session_id in where_is, "a hit from another example's people"
                assert visible(scope, where_is[hit.session_id])
                assert hit.chat_id == where_is[hit.session_id][1]
                for snippet in hit.snippets:
                    text = unmarked(snippet.text)
                    assert text.endswith(f"-{user}")
                    assert text not in unseen
            # What a person can see is found: their own matching sessions all come back.
            expected = set()
            for sid, place in where_is.items():
                if visible(scope, place):
                    stored = await store.get_messages(sid, SearchScope(user))
                    if any(matches(w, m.content) for m in stored for w in query_words):
                        expected.add(sid)
            assert {h.session_id for h in hits} == expected

"""The `session_search` tool over a real session store: its arguments, its JSON answer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.agent.recall import MAX_LIMIT, MAX_QUERY_CHARS, search_history
from gateway.agent.session_search import SessionSearch, query_from_arguments
from gateway.errors import RecallArgumentError
from memory_core import SessionStore
from tests.gateway.agent.test_recall import DAY, MARCH_1, Recapper, add_session, direct
from tests.timing import scaled


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with SessionStore(tmp_path / "state.db") as opened:
        yield opened


def search_tool(store: SessionStore, recapper: Recapper, session: int | None = None) -> Any:
    return SessionSearch(store, recapper, direct("1"), session, timeout=scaled(5.0))


async def test_since_and_until_narrow_the_search(store: SessionStore) -> None:
    march = await add_session(store, "1", ["violin lesson"])
    april = await add_session(store, "1", ["violin recital"], start=MARCH_1 + 31 * DAY)
    only_march = query_from_arguments(
        {"query": "violin", "since": "2026-03-01", "until": "2026-03-01"}
    )
    result = await search_history(store, Recapper(), only_march, direct("1"))
    assert [s.session_id for s in result.sessions] == [march]
    from_april = query_from_arguments({"query": "violin", "since": "2026-04-01T00:00"})
    result = await search_history(store, Recapper(), from_april, direct("1"))
    assert [s.session_id for s in result.sessions] == [april]


async def test_fts_syntax_and_a_huge_query_are_plain_text(store: SessionStore) -> None:
    await add_session(store, "1", ['the "quoted" NEAR( walrus* OR bar'])
    tool = search_tool(store, Recapper())
    for query in ['"quoted" NEAR( walrus* OR', 'bar) AND "', "-bar ^walrus", "x" * 10_000]:
        payload = json.loads(await tool.handle({"query": query}))
        assert payload["success"] is True, payload
    huge = json.loads(await tool.handle({"query": "walrus " * 2_000}))
    assert huge["success"] is True and len(huge["query"]) <= MAX_QUERY_CHARS
    assert huge["query"].endswith("walrus")  # cut at a word boundary
    assert any("cut" in note for note in huge["notes"])
    assert huge["sessions"] and huge["sessions"][0]["kind"] == "recap"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({}, "query is required"),
        ({"query": "   "}, "query is required"),
        ({"query": 7}, "query is required"),
        ({"query": "x", "since": "last tuesday"}, "since must be an ISO date"),
        ({"query": "x", "until": "2026-13-01"}, "until must be an ISO date"),
        ({"query": "x", "since": 20260301}, "since must be an ISO date"),
        ({"query": "x", "since": "2026-03-02", "until": "2026-03-01"}, "since must be before"),
        ({"query": "x", "limit": "three"}, "limit must be a whole number"),
        ({"query": "x", "limit": True}, "limit must be a whole number"),
        ({"query": "x", "limit": 2.5}, "limit must be a whole number"),
    ],
)
async def test_bad_arguments_are_a_clear_tool_error(
    store: SessionStore, arguments: dict[str, Any], error: str
) -> None:
    recapper = Recapper()
    payload = json.loads(await search_tool(store, recapper).handle(arguments))
    assert payload["success"] is False and error in payload["error"]
    assert recapper.requests == []
    with pytest.raises(RecallArgumentError):
        query_from_arguments(arguments)


@pytest.mark.parametrize(
    ("limit", "used", "noted"),
    [(0, 1, True), (-3, 1, True), (99, MAX_LIMIT, True), ("2", 2, False), (4.0, 4, False)],
)
def test_a_limit_out_of_range_is_clamped_with_a_note(limit: object, used: int, noted: bool) -> None:
    query = query_from_arguments({"query": "x", "limit": limit})
    assert query.limit == used
    assert bool(query.notes) == noted


async def test_the_limit_caps_the_conversations_returned(store: SessionStore) -> None:
    for day in range(8):
        await add_session(store, "1", [f"marathon training day {day}"], start=MARCH_1 + day * DAY)
    tool = search_tool(store, Recapper())
    assert len(json.loads(await tool.handle({"query": "marathon"}))["sessions"]) == 3
    many = json.loads(await tool.handle({"query": "marathon", "limit": 50}))
    assert len(many["sessions"]) == MAX_LIMIT and many["notes"]


async def test_nothing_found_says_so(store: SessionStore) -> None:
    payload = json.loads(await search_tool(store, Recapper()).handle({"query": "nothing here"}))
    assert payload["success"] is True and payload["sessions"] == []
    assert payload["notes"] == ["no earlier conversation matched"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    query=st.text(
        alphabet=st.sampled_from(list("\"*()^:-+ NEARORANDNOTwalrus猫\\'\x00\u200b{}[]")),
        min_size=1,
        max_size=80,
    )
)
async def test_any_query_text_is_searched_as_plain_text(store: SessionStore, query: str) -> None:
    """FTS operators, quotes, NULs and invisibles never become an error or a crash."""
    if not await store.list_sessions(direct("1")):
        await add_session(store, "1", ['walrus "NEAR" (猫) OR AND NOT'])
    payload = json.loads(await search_tool(store, Recapper()).handle({"query": query}))
    assert payload["success"] is (bool(query.strip())), payload


async def test_a_time_phrase_in_the_query_is_read_in_the_persons_zone(
    store: SessionStore,
) -> None:
    """At 01:00 on 2 March in Shanghai (17:00 UTC on 1 March), "yesterday" is 1 March
    there: the violin lesson of 1 March at 12:00 UTC is in it, while for a tool reading
    UTC it is today and the lesson of 28 February is yesterday."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    lesson = await add_session(store, "1", ["violin lesson"])  # 2026-03-01 12:00 UTC
    before = await add_session(store, "1", ["violin scales"], start=MARCH_1 - DAY)
    moment = datetime.fromtimestamp(MARCH_1 + 5 * 3600, ZoneInfo("Asia/Shanghai"))
    theirs = SessionSearch(store, Recapper(), direct("1"), None, 5.0, now=lambda: moment)
    found = json.loads(await theirs.handle({"query": "violin yesterday"}))
    assert [s["session_id"] for s in found["sessions"]] == [lesson], found
    utc = SessionSearch(
        store, Recapper(), direct("1"), None, 5.0, now=lambda: moment.astimezone(UTC)
    )
    found = json.loads(await utc.handle({"query": "violin yesterday"}))
    assert [s["session_id"] for s in found["sessions"]] == [before], found


async def test_since_and_until_dates_are_the_persons_days(store: SessionStore) -> None:
    """On 1 March at 20:00 UTC it is already 2 March in Shanghai: the model's
    "until 2026-03-01" in the person's zone leaves that lesson out, in UTC it keeps it."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    late = await add_session(store, "1", ["violin duet"], start=MARCH_1 + 8 * 3600)
    moment = datetime.fromtimestamp(MARCH_1 + 30 * DAY, ZoneInfo("Asia/Shanghai"))
    theirs = SessionSearch(store, Recapper(), direct("1"), None, 5.0, now=lambda: moment)
    asked = {"query": "violin", "until": "2026-03-01"}
    found = json.loads(await theirs.handle(asked))
    assert found["sessions"] == [], found
    found = json.loads(await search_tool(store, Recapper()).handle(asked))
    assert [s["session_id"] for s in found["sessions"]] == [late], found

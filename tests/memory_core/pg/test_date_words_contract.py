"""A message's date and speaker are words of it, on both session stores alike.

Every test runs against SessionStore (SQLite) and PgSessionStore: a message is found
by its UTC date's month and weekday in English, Spanish and Chinese, its year and
its speaker's name; a snippet still shows the message's text alone; a prefix (a
one-character CJK query, the no-hit retry) looks in the text only; an edit keeps the
words and a deletion drops them; `store.check` confirms each index agrees with its rows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core.pg.database import PgDatabase
from memory_core.pg.sessions import PgSessionStore
from memory_core.scopes import SearchScope
from memory_core.sessions.backend import SessionBackend
from memory_core.sessions.models import MATCH_END, MATCH_START
from memory_core.sessions.store import SessionStore
from tests.memory_core.sessions.helpers import message, origin

ALICE = "telegram-1001"
ME = SearchScope(ALICE)
MONDAY = 1_683_504_000 + 14.5 * 3600  # Monday 8 May 2023, 14:30 UTC
THURSDAY = 1_731_542_400 + 9 * 3600  # Thursday 14 November 2024, 09:00 UTC
SUNDAY_LAST = 1_683_504_000 - 0.0004  # Sunday 7 May 2023, 23:59:59.9996 UTC


@pytest.fixture
async def pg_store(pg_database: str) -> AsyncIterator[SessionBackend]:
    async with PgDatabase(pg_database, max_size=4) as db, PgSessionStore(db) as backend:
        yield backend


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SessionBackend]:
    async with SessionStore(tmp_path / "state.db") as backend:
        yield backend


@pytest.fixture(params=["sqlite", "pg"])
def store(request: pytest.FixtureRequest) -> SessionBackend:
    return request.getfixturevalue(f"{request.param}_store")  # type: ignore[no-any-return]


async def say(
    store: SessionBackend, chat: str, text: str, at: float, speaker: str | None = None
) -> int:
    """A message of Alice's in its own chat (its own session); the session's id."""
    where = origin(ALICE, chat, chat_type="group")
    written = await store.append_messages(
        origin=where, messages=[message(text, at, speaker_name=speaker, platform_message_id=chat)]
    )
    return written.session_id


async def found(store: SessionBackend, query: str) -> list[int]:
    return [hit.session_id for hit in await store.search(query, ME)]


async def index_agrees(store: SessionBackend) -> None:
    lines: list[str] = []
    await store.check(lines.append)  # raises when an index disagrees with the rows
    assert lines


async def test_a_message_is_found_by_its_date_in_three_languages(store: SessionBackend) -> None:
    monday = await say(store, "-1", "we finally fixed the boiler", MONDAY)
    await say(store, "-2", "the heating works again", THURSDAY)
    for query in ("May", "mayo", "5月", "Monday", "lunes", "2023", "8"):
        assert await found(store, query) == [monday], query
    assert (await found(store, "星期一"))[0] == monday  # 星期 is every day's, 期一 Monday's
    thursday = await found(store, "jueves noviembre")
    assert thursday != [monday] and len(thursday) == 1
    await index_agrees(store)


async def test_the_date_is_the_utc_second_a_message_falls_in(store: SessionBackend) -> None:
    sunday = await say(store, "-1", "late night thoughts", SUNDAY_LAST)
    assert await found(store, "domingo") == [sunday]
    assert await found(store, "lunes") == []  # not rounded into Monday
    assert await found(store, "7 mayo") == [sunday]


async def test_a_message_is_found_by_its_speakers_name(store: SessionBackend) -> None:
    caroline = await say(store, "-1", "the boiler is fixed", MONDAY, speaker="Caroline")
    await say(store, "-2", "the boiler is fixed", MONDAY, speaker="Melanie")
    await say(store, "-3", "the boiler is fixed", MONDAY)
    assert await found(store, "Caroline") == [caroline]
    assert (await found(store, "caroline boiler"))[0] == caroline  # both words in one message


async def test_a_snippet_shows_the_text_alone(store: SessionBackend) -> None:
    await say(store, "-1", "the boiler is fixed", MONDAY, speaker="Caroline")
    for query in ("Caroline", "lunes 星期一 2023", "boiler mayo"):
        (hit,) = await store.search(query, ME)
        (snippet,) = hit.snippets
        plain = snippet.text.replace(MATCH_START, "").replace(MATCH_END, "")
        assert plain == "the boiler is fixed", (query, snippet.text)
        assert ("boiler" in query) == (MATCH_START in snippet.text)  # only the text is marked


async def test_a_prefix_looks_in_the_text_only(store: SessionBackend) -> None:
    await say(store, "-1", "we planned the trip", MONDAY)  # 星期一 holds the bigram 期一
    await say(store, "-2", "el martes fuimos", THURSDAY)
    assert await found(store, "期") == []  # a one-character CJK query is a prefix
    assert await found(store, "mond") == []  # the no-hit retry is a prefix too
    due = await say(store, "-3", "预产期是明年三月", THURSDAY)
    assert await found(store, "期") == [due]


async def test_an_edit_keeps_the_date_and_a_deletion_drops_it(store: SessionBackend) -> None:
    monday = await say(store, "-1", "the old words", MONDAY, speaker="Caroline")
    edited = await store.edit_message(
        platform="telegram", chat_id="-1", platform_message_id="-1", user_key=ALICE,
        text="the new words",
    )  # fmt: skip
    assert edited is not None
    assert await found(store, "lunes new") == [monday]
    assert await found(store, "Caroline") == [monday]
    await index_agrees(store)
    deleted = await store.edit_message(
        platform="telegram", chat_id="-1", platform_message_id="-1", user_key=ALICE, text=None
    )
    assert deleted is not None
    assert await found(store, "lunes") == await found(store, "Caroline") == []
    await index_agrees(store)

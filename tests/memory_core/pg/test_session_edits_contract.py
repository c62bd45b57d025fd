"""Edits, deletions and `/forget` on both session stores: the same calls, the same rows.

Every test runs against SessionStore (SQLite) and PgSessionStore; `store.check` then
confirms each backend's search index still agrees with the rows. The last test reads
every PostgreSQL row whole, as a dump would.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core.errors import PersonErasedError
from memory_core.fence import ErasureFence, working
from memory_core.pg.database import PgDatabase
from memory_core.pg.sessions import PgSessionStore
from memory_core.scopes import SearchScope
from memory_core.sessions import FORGOTTEN, EditedMessage, SearchOptions
from memory_core.sessions.backend import SessionBackend
from memory_core.sessions.store import SessionStore
from tests.memory_core.sessions.biscuit import (
    ALICE,
    BOB,
    ROWS_CHANGED,
    SAID,
    TEXTS,
    write_biscuit_history,
)
from tests.memory_core.sessions.helpers import message, origin

GROUP = "-500"
EVERYWHERE = SearchOptions(include_internal=True)


@pytest.fixture
async def pg_store(pg_database: str) -> AsyncIterator[SessionBackend]:
    async with (
        PgDatabase(pg_database, max_size=4) as db,
        PgSessionStore(db, clock=lambda: 5000.0, fence=ErasureFence()) as backend,
    ):
        yield backend


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SessionBackend]:
    path = tmp_path / "state.db"
    async with SessionStore(path, clock=lambda: 5000.0, fence=ErasureFence()) as backend:
        yield backend


@pytest.fixture(params=["sqlite", "pg"])
def store(request: pytest.FixtureRequest) -> SessionBackend:
    return request.getfixturevalue(f"{request.param}_store")  # type: ignore[no-any-return]


async def texts_of(store: SessionBackend, session_id: int, user: str = ALICE) -> list[str]:
    return [m.content for m in await store.get_messages(session_id, SearchScope(user))]


async def found(store: SessionBackend, words: str, user: str = ALICE) -> list[int]:
    return [h.session_id for h in await store.search(words, SearchScope(user), EVERYWHERE)]


async def index_agrees(store: SessionBackend) -> None:
    lines: list[str] = []
    await store.check(lines.append)  # raises when an index disagrees with the rows
    assert lines


async def edit(store: SessionBackend, pmid: str, text: str | None, **kw: object) -> object:
    where: dict[str, object] = {"platform": "telegram", "chat_id": ALICE, "user_key": ALICE}
    where.update(kw)
    return await store.edit_message(platform_message_id=pmid, text=text, **where)  # type: ignore[arg-type]


# edits


async def test_an_edit_replaces_the_text_and_the_search_follows(store: SessionBackend) -> None:
    written = await store.append_messages(
        origin=origin(ALICE),
        messages=[
            message("I live in Lisbon", 1000, platform_message_id="10"),
            message("Lovely city", 1001, role="assistant"),
        ],
    )
    assert await found(store, "Lisbon") == [written.session_id]

    edited = await edit(store, "10", "I live in Porto now")

    first = written.message_ids[0]
    assert edited == EditedMessage(
        first, written.session_id, ALICE, "I live in Lisbon", "I live in Porto now", (first,)
    )
    assert await texts_of(store, written.session_id) == ["I live in Porto now", "Lovely city"]
    assert await found(store, "Lisbon") == []
    assert await found(store, "Porto") == [written.session_id]
    await index_agrees(store)


async def test_editing_to_the_same_text_returns_it_unchanged(store: SessionBackend) -> None:
    written = await store.append_message(
        origin=origin(ALICE), message=message("same words", 1000, platform_message_id="10")
    )
    edited = await edit(store, "10", "same words")
    assert isinstance(edited, EditedMessage)
    assert (edited.old_text, edited.text) == ("same words", "same words")
    assert await texts_of(store, written.session_id) == ["same words"]


async def test_a_deletion_keeps_the_row_empty_and_not_the_persons_words(
    store: SessionBackend,
) -> None:
    written = await store.append_messages(
        origin=origin(ALICE),
        messages=[
            message("my pin is 4321 🔑", 1000, platform_message_id="10"),
            message("Noted", 1001, role="assistant"),
            message("thanks", 1002, platform_message_id="11"),
        ],
    )
    edited = await edit(store, "10", None)
    assert isinstance(edited, EditedMessage)
    assert (edited.old_text, edited.text) == ("my pin is 4321 🔑", None)
    stored = await store.get_messages(written.session_id, SearchScope(ALICE))
    assert [(m.content, m.own_words) for m in stored] == [
        ("", False), ("Noted", True), ("thanks", True),
    ]  # fmt: skip
    assert await found(store, "4321") == [] and await found(store, "🔑") == []
    again = await edit(store, "10", None)
    assert isinstance(again, EditedMessage) and (again.old_text, again.text) == ("", None)
    await index_agrees(store)


async def test_only_a_stored_message_of_that_person_in_that_chat_is_edited(
    store: SessionBackend,
) -> None:
    group = {"chat_type": "group"}
    await store.append_message(
        origin=origin(BOB, GROUP, **group),
        message=message("bob's words", 1, platform_message_id="7"),
    )
    await store.append_message(
        origin=origin(ALICE, GROUP, **group),
        message=message("a reply", 2, role="assistant", platform_message_id="8"),
    )
    assert await edit(store, "7", "x", chat_id=GROUP) is None  # Bob's, not Alice's
    assert await edit(store, "7", "x", chat_id=GROUP, user_key=BOB, platform="discord") is None
    assert await edit(store, "7", "x", chat_id="-501", user_key=BOB) is None  # another chat
    assert await edit(store, "8", "x", chat_id=GROUP) is None  # not a person's message
    assert await edit(store, "9", "x", chat_id=GROUP) is None  # not stored (yet)
    anyone = await edit(store, "7", None, chat_id=GROUP, user_key=None)  # a Discord deletion
    assert isinstance(anyone, EditedMessage) and anyone.user_key == BOB
    assert await found(store, "bob's", BOB) == []


async def test_an_edit_reaches_the_copy_a_compression_kept(store: SessionBackend) -> None:
    said = message("I work as a nurse", 1000, platform_message_id="10")
    written = await store.append_message(origin=origin(ALICE), message=said)
    child = await store.start_child_session(
        written.session_id, messages=[message("I work as a nurse", 1000, platform_message_id="10")]
    )
    edited = await edit(store, "10", "I work as a teacher")
    assert isinstance(edited, EditedMessage)
    assert (edited.id, edited.session_id) == (written.message_ids[0], written.session_id)
    assert len(edited.message_ids) == 2 and edited.message_ids[0] == edited.id
    assert await texts_of(store, child) == ["I work as a teacher"] * 2  # the lineage, both
    assert await found(store, "nurse") == []


async def test_edits_and_forgetting_respect_the_erasure_fence(store: SessionBackend) -> None:
    written = await store.append_message(
        origin=origin(ALICE), message=message("hello there", 1, platform_message_id="10")
    )
    with working():
        store.fence.erasing(ALICE)
        with pytest.raises(PersonErasedError):
            await edit(store, "10", "changed")
        with pytest.raises(PersonErasedError):
            await edit(store, "10", None, user_key=None)  # the author is found, then fenced
        with pytest.raises(PersonErasedError):
            await store.forget_words(ALICE, [written.message_ids[0]], ["hello"])
    assert await texts_of(store, written.session_id) == ["hello there"]


# forget


async def test_forget_words_leaves_no_copy_in_any_message_prompt_or_run(
    store: SessionBackend,
) -> None:
    history = await write_biscuit_history(store)
    bobs = await store.append_message(origin=origin(BOB), message=message(SAID, 1))
    assert history.review in await found(store, "Biscuit")

    changed = await store.forget_words(ALICE, [history.evidence], TEXTS)

    assert changed == ROWS_CHANGED
    exported = "\n".join(await store.export_lines(ALICE))
    assert "biscuit" not in exported.lower() and "beagle" not in exported.lower()
    assert await store.get_session(history.review) is None
    assert await store.get_session(history.extraction) is not None  # it held none of it
    prompt = await store.get_system_prompt(history.child, SearchScope(ALICE))
    assert prompt is not None and "Biscuit" not in prompt and "User likes tea" in prompt
    stored = await store.get_messages(history.child, SearchScope(ALICE))
    assert [(m.content, m.own_words) for m in stored][:2] == [
        (FORGOTTEN, True),  # "I have a dog called Biscuit", found by its text
        ("", True),  # the tool call: its content was empty, its arguments are scrubbed
    ]
    call = json.loads(stored[1].tool_calls or "[]")  # still valid JSON, twice over
    assert json.loads(call[0]["function"]["arguments"])["content"] == FORGOTTEN
    assert [(m.content, m.own_words) for m in stored if m.content.startswith("he is")] == []
    assert [m.own_words for m in stored if m.content == FORGOTTEN][-2:] == [False, False]
    assert await found(store, "Biscuit") == [] and await found(store, "beagle") == []
    still = sorted([history.first, history.extraction])
    assert sorted(await found(store, "cat")) == still  # the rest is still found
    assert await found(store, "Biscuit", BOB) == [bobs.session_id]  # Bob's words are his
    assert await store.forget_words(ALICE, [history.evidence], TEXTS) == 0  # nothing left
    await index_agrees(store)


async def test_forget_words_matches_any_case_and_ignores_blank_texts(
    store: SessionBackend,
) -> None:
    written = await store.append_messages(
        origin=origin(ALICE),
        messages=[message("i HAVE a dog called biscuit, ok?", 1), message("hello", 2)],
    )
    assert await store.forget_words(ALICE, [], ["", "  "]) == 0
    assert await store.forget_words(BOB, [written.message_ids[1]], [SAID]) == 0  # not Bob's
    assert await store.forget_words(ALICE, [], [SAID]) == 1
    assert await texts_of(store, written.session_id) == [f"{FORGOTTEN}, ok?", "hello"]


async def test_no_postgresql_row_holds_a_forgotten_text(pg_store: SessionBackend) -> None:
    assert isinstance(pg_store, PgSessionStore)
    await write_biscuit_history(pg_store)
    history_rows = await _rows_holding(pg_store.db, "biscuit")
    assert history_rows  # the scan finds them before
    await pg_store.forget_words(ALICE, [], TEXTS)
    assert await _rows_holding(pg_store.db, "biscuit") == []
    assert await _rows_holding(pg_store.db, "beagle") == []


async def _rows_holding(db: PgDatabase, word: str) -> list[str]:
    """Every table of the test's schema read whole, each row as text (all its columns,
    the search vectors too), as a dump would list it."""
    held: list[str] = []
    async with db.connection() as conn:
        cur = await conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        )
        for (table,) in await cur.fetchall():
            rows = await conn.execute(
                f'SELECT r::text FROM "{table}" r WHERE r::text ILIKE %s', (f"%{word}%",)
            )
            held += [f"{table}: {row[0][:80]}" for row in await rows.fetchall()]
    return held

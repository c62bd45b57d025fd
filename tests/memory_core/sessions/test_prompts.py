"""A session's system prompt is stored once with it and read back within its scope."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from memory_core.errors import SessionNotFoundError
from memory_core.scopes import SearchScope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.store import SessionStore
from tests.memory_core.sessions.helpers import message, open_db, origin

PROMPT = "You are Mnemo.\n\nUSER.md:\nName: Ada\u00a7 likes 茶 — and emoji 🍵\n"


def test_the_first_prompt_is_kept_byte_for_byte(tmp_path: Path) -> None:
    with open_db(tmp_path) as db:
        session = db.append_message(origin=origin(), message=message("hello")).session_id
        assert db.get_system_prompt(session, SearchScope("telegram-1")) is None
        assert db.set_system_prompt(session, PROMPT) == PROMPT
        assert db.set_system_prompt(session, "rebuilt after USER.md changed") == PROMPT
        assert db.get_system_prompt(session, SearchScope("telegram-1")) == PROMPT


def test_the_prompt_survives_reopening_the_database(tmp_path: Path) -> None:
    with open_db(tmp_path) as db:
        session = db.append_message(origin=origin(), message=message("hello")).session_id
        db.set_system_prompt(session, PROMPT)
    with SessionDB(tmp_path / "state.db") as db:
        assert db.get_system_prompt(session, SearchScope("telegram-1")) == PROMPT


def test_another_persons_scope_never_reads_the_prompt(tmp_path: Path) -> None:
    with open_db(tmp_path) as db:
        group = origin("telegram-1", "g1", chat_type="group")
        session = db.append_message(origin=group, message=message("hello")).session_id
        db.set_system_prompt(session, PROMPT)
        assert db.get_system_prompt(session, SearchScope("telegram-2")) is None
        assert db.get_system_prompt(session, SearchScope("telegram-1", "g2")) is None
        assert db.get_system_prompt(session, SearchScope("telegram-1", "g1")) == PROMPT


def test_a_prompt_for_a_missing_session_is_refused(tmp_path: Path) -> None:
    with open_db(tmp_path) as db, pytest.raises(SessionNotFoundError):
        db.set_system_prompt(999, PROMPT)


def test_a_child_session_starts_without_its_parents_prompt(tmp_path: Path) -> None:
    with open_db(tmp_path) as db:
        parent = db.append_message(origin=origin(), message=message("hello")).session_id
        db.set_system_prompt(parent, PROMPT)
        child = db.start_child_session(parent)
        assert db.get_system_prompt(child, SearchScope("telegram-1")) is None
        assert db.get_system_prompt(parent, SearchScope("telegram-1")) is None  # ended


def test_ending_a_session_drops_its_prompt(tmp_path: Path) -> None:
    """An ended session never resumes: its copy of the profile goes with it."""
    with open_db(tmp_path) as db:
        session = db.append_message(origin=origin(), message=message("hello")).session_id
        db.set_system_prompt(session, PROMPT)
        db.end_session(session, "new")
        assert db.get_system_prompt(session, SearchScope("telegram-1")) is None
        assert db.conn.execute(
            "SELECT count(*) FROM sessions WHERE system_prompt IS NOT NULL"
        ).fetchone() == (0,)


async def test_concurrent_first_writers_all_get_the_same_prompt(tmp_path: Path) -> None:
    async with SessionStore(tmp_path / "state.db") as store:
        session = (await store.append_message(origin=origin(), message=message("hi"))).session_id
        kept = await asyncio.gather(
            *(store.set_system_prompt(session, f"prompt {i}") for i in range(8))
        )
        assert len(set(kept)) == 1
        assert await store.get_system_prompt(session, SearchScope("telegram-1")) == kept[0]


async def test_clearing_a_persons_prompts_touches_only_their_open_sessions(
    tmp_path: Path,
) -> None:
    async with SessionStore(tmp_path / "state.db") as store:
        mine = (await store.append_message(origin=origin(), message=message("a"))).session_id
        group = origin("telegram-1", "g1", chat_type="group")
        in_group = (await store.append_message(origin=group, message=message("b"))).session_id
        theirs_origin = origin("telegram-2")
        theirs = (await store.append_message(origin=theirs_origin, message=message("c"))).session_id
        for session in (mine, in_group, theirs):
            await store.set_system_prompt(session, PROMPT)
        assert await store.clear_system_prompts("telegram-1") == 2
        assert await store.get_system_prompt(mine, SearchScope("telegram-1")) is None
        assert await store.get_system_prompt(in_group, SearchScope("telegram-1")) is None
        assert await store.get_system_prompt(theirs, SearchScope("telegram-2")) == PROMPT
        # The next build stores the fresh prompt.
        assert await store.set_system_prompt(mine, "fresh") == "fresh"

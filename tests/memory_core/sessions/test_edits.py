"""`SessionStore.edit_message` and `forget_words` on state.db, down to the bytes on disk.

The behaviour both backends share is tested in tests/memory_core/pg/
test_session_edits_contract.py; here, what only SQLite has: files.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core.scopes import SearchScope
from memory_core.sessions import SearchOptions, SessionStore
from tests.memory_core.sessions.biscuit import ALICE, TEXTS, write_biscuit_history
from tests.memory_core.sessions.helpers import message, origin

WORDS = (b"Biscuit", b"biscuit", b"iscuit", b"beagle")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with SessionStore(tmp_path / "data" / "state.db", clock=lambda: 5000.0) as opened:
        yield opened


def files_holding(root: Path, words: tuple[bytes, ...]) -> list[str]:
    """`file:word` for each file under `root` (state.db, -wal, -shm) holding a word."""
    held = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            held += [f"{path.name}:{w.decode()}" for w in words if w in data]
    return held


async def test_forget_words_leaves_no_byte_in_state_db_its_wal_or_shm(
    store: SessionStore,
) -> None:
    history = await write_biscuit_history(store)
    data_dir = store.path.parent
    assert files_holding(data_dir, WORDS)  # the scan finds them before

    await store.forget_words(ALICE, [history.evidence], TEXTS)

    assert files_holding(data_dir, WORDS) == []
    assert files_holding(data_dir, (b"three and loves the park",)) == []  # the evidence
    everywhere = SearchOptions(include_internal=True)
    assert await store.search("Biscuit", SearchScope(ALICE), everywhere) == []
    assert await store.search("cat", SearchScope(ALICE), everywhere) != []


async def test_an_edited_message_is_found_by_its_new_words_after_a_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    async with SessionStore(path) as first:
        await first.append_message(
            origin=origin(ALICE), message=message("I live in Lisbon", 1, platform_message_id="9")
        )
        await first.edit_message(
            platform="telegram",
            chat_id=ALICE,
            platform_message_id="9",
            user_key=ALICE,
            text="I moved to Porto",
        )
    async with SessionStore(path) as again:
        assert await again.search("Lisbon", SearchScope(ALICE)) == []
        hits = await again.search("Porto", SearchScope(ALICE))
        assert [s.text for h in hits for s in h.snippets] == ["I moved to >>>Porto<<<"]

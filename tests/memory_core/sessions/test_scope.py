"""Scopes: which conversations a recall from a chat may see, and a stored session's own.

The isolation property itself (nobody's search returns another person's messages)
runs on both stores in tests/memory_core/pg/test_scope_contract.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_core.errors import InvalidMessageError
from memory_core.scopes import SearchScope, recall_scope
from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import NewMessage
from tests.memory_core.sessions.helpers import origin
from tests.memory_core.sessions.scope_cases import place_origin


def test_recall_sees_the_thread_in_a_thread_the_group_in_a_group_and_mine_in_a_direct_chat() -> (
    None
):
    assert recall_scope("telegram-1", "group-9", "group") == SearchScope(
        "telegram-1", "group-9", outside_threads=True
    )
    assert recall_scope("telegram-1", "1", "private") == SearchScope(
        "telegram-1", outside_threads=True
    )
    assert recall_scope("discord-1", "chan", "group", "777") == SearchScope(
        "discord-1", "chan", "777"
    )
    # a Telegram forum topic, and a topic of a private chat: the topic only
    assert recall_scope("telegram-1", "1", "private", "5") == SearchScope("telegram-1", "1", "5")
    assert recall_scope("telegram-1", "group-9", "group", "") == recall_scope(
        "telegram-1", "group-9", "group"
    )


@pytest.mark.parametrize(
    ("chat", "thread", "outside"),
    [(None, "7", False), ("c", "", False), ("c", "7", True)],
)
def test_a_scope_with_an_impossible_thread_is_refused(
    chat: str | None, thread: str, outside: bool
) -> None:
    with pytest.raises(InvalidMessageError):
        SearchScope("telegram-1", chat, thread, outside_threads=outside)


def test_a_stored_session_recalls_what_its_chat_may(tmp_path: Path) -> None:
    with SessionDB(tmp_path / "state.db") as db:
        group = db.append_message(
            origin=origin("telegram-1", "group-9", chat_type="group"),
            message=NewMessage("user", "hi all", 1.0, key="g"),
        )
        direct = db.append_message(
            origin=origin("telegram-1"), message=NewMessage("user", "hi", 2.0, key="d")
        )
        thread = db.append_message(
            origin=place_origin("discord-1", "chan", "777", group=True),
            message=NewMessage("user", "psst", 3.0, key="t"),
        )
        in_group, in_private = db.get_session(group.session_id), db.get_session(direct.session_id)
        in_thread = db.get_session(thread.session_id)
    assert in_group is not None
    assert in_group.scope == SearchScope("telegram-1", "group-9", outside_threads=True)
    assert in_private is not None
    assert in_private.scope == SearchScope("telegram-1", outside_threads=True)
    assert in_thread is not None and in_thread.scope == SearchScope("discord-1", "chan", "777")

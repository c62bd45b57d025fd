"""`SentHistory`: a session's stored messages as requests carry them, grown turn by turn."""

from __future__ import annotations

import json

import pytest

from gateway.agent.compression import SUMMARY_PREFIX, clip_history, message_chars
from gateway.agent.sent_history import SentHistory, stored_form
from gateway.agent.transcript import as_sent
from gateway.delivery.links import trusted_links
from gateway.media.markers import IMAGE_PREFIX, without_image_lines
from gateway.open_sessions import OpenSession, SessionCache
from memory_core import AppendResult, MemoryManager, NewMessage, StoredMessage

CAP = 50


def _stored(i: int, role: str = "user", content: str = "hi", **kw: object) -> StoredMessage:
    fields: dict[str, object] = dict(
        id=i,
        session_id=7,
        role=role,
        content=content,
        timestamp=1000.0 + i,
        tool_name=None,
        tool_calls=None,
        tool_call_id=None,
        platform_message_id=None,
        speaker_name=None,
    )
    fields.update(kw)
    return StoredMessage(**fields)  # type: ignore[arg-type]


SESSION = [
    _stored(1, content="x" * 120),  # longer than the cap: cut
    _stored(
        2,
        "assistant",
        "",
        tool_calls=json.dumps([{"id": "c1", "type": "function", "function": {"name": "t"}}]),
    ),
    _stored(3, "tool", "{}", tool_call_id="c1", tool_name="t"),
    _stored(4, "assistant", "done"),
    _stored(5, content="and now?"),
]


def test_the_earlier_messages_are_the_rebuild_from_the_store_and_their_size() -> None:
    history = SentHistory.of(7, SESSION, CAP)
    earlier, size = history.earlier()
    rebuilt = clip_history([as_sent(m) for m in SESSION[:-1]], CAP)
    assert json.dumps(earlier) == json.dumps(rebuilt)  # the order of keys too
    assert size == sum(message_chars(m) for m in rebuilt)
    assert history.last_id == 5


def test_grown_by_written_messages_it_equals_the_history_read_back() -> None:
    history = SentHistory.of(7, SESSION[:1], CAP)
    written = [
        NewMessage(
            role=m.role,
            content=m.content,
            timestamp=m.timestamp,
            key=str(m.id),
            tool_name=m.tool_name,
            tool_calls=m.tool_calls,
            tool_call_id=m.tool_call_id,
        )
        for m in SESSION[1:]
    ]
    assert history.add_written(written, AppendResult(7, False, (2, 3, 4, 5), inserted=4))
    whole = SentHistory.of(7, SESSION, CAP)
    assert json.dumps(history.earlier()) == json.dumps(whole.earlier())


@pytest.mark.parametrize(
    "result",
    [
        AppendResult(8, True, (6,), inserted=1),  # another session
        AppendResult(7, False, (4,), inserted=0),  # already stored: not new
    ],
)
def test_a_write_it_cannot_follow_is_refused(result: AppendResult) -> None:
    history = SentHistory.of(7, SESSION[:4], CAP)
    message = NewMessage(role="user", content="again", timestamp=2000.0, key="k")
    assert not history.add_written([message], result)


def test_a_message_that_would_not_sort_last_is_refused() -> None:
    history = SentHistory.of(7, SESSION, CAP)
    earlier_clock = NewMessage(role="user", content="late", timestamp=1000.5, key="k")
    assert not history.extend([stored_form(earlier_clock, 6, 7)])  # the store sorts it 2nd
    assert history.extend([stored_form(NewMessage("user", "ok", 1005.0, key="j"), 6, 7)])


def test_the_cache_keeps_only_the_most_recent_histories_within_its_bound() -> None:
    size = SentHistory.of(7, SESSION, CAP).encoded_bytes
    cache = SessionCache(max_open=10, history_bytes=2 * size)
    sessions = {key: OpenSession(1, "prompt", MemoryManager()) for key in ("a", "b", "c")}
    for key, session in sessions.items():
        session.history = SentHistory.of(7, SESSION, CAP)
        cache.put(key, session)
    cache.get("a")  # now the most recently used: b, c, a
    assert cache.trim() == []
    kept = {key: session.history is not None for key, session in sessions.items()}
    assert kept == {"a": True, "b": False, "c": True}


def test_the_person_links_are_those_of_every_earlier_message_holding_one() -> None:
    """What a reply trusts is `trusted_links` of every earlier message of the person's
    (picture lines and summaries left out), from the messages holding a link alone."""
    said = [
        _stored(1, content="see example.com/a please"),
        _stored(2, "assistant", "and bad.example/b"),  # the model's: not trusted
        _stored(3, content="nothing here."),
        _stored(4, content=f"{IMAGE_PREFIX}a shot of evil.example/x]\nmine: t.me/y"),
        _stored(5, content=SUMMARY_PREFIX + " they sent summary.example/z"),
        _stored(6, content="https://last.example/q is this turn's"),
    ]
    history = SentHistory.of(7, said, 500)
    everything = [
        without_image_lines(m["content"])
        for m in history.earlier()[0]
        if m["role"] == "user" and not m["content"].startswith(SUMMARY_PREFIX)
    ]
    assert trusted_links(history.linked_earlier()) == trusted_links(everything)
    assert trusted_links(history.linked_earlier()) == {"example.com/a", "t.me/y"}
    assert history.linked_earlier() == ["see example.com/a please", "mine: t.me/y"]
    history.extend([_stored(7, "assistant", "ok")])  # message 6 is an earlier one now
    assert "last.example/q" in trusted_links(history.linked_earlier())

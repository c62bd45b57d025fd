"""A store that refuses the writes of stored messages' turns: one apology per session and
outage, none for a message not stored yet (`NotStoredError`), and the outage ends with a
completed turn or after a quiet spell."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import pytest

from gateway.errors import NotStoredError
from gateway.guard import Once, Outage, guarded
from gateway.i18n import Catalogs
from gateway.person_locale import PersonLocales
from memory_core import PostgresUnavailableError
from tests.clock import Clock
from tests.gateway.sinks import ListSink

APOLOGY = "(something went wrong on my side; please try again)"


async def _refused() -> int | None:
    raise PostgresUnavailableError("PostgreSQL is unavailable: could not extend file")


async def _answered() -> int | None:
    return 7


async def _turn(
    outage: Outage, key: str, work: Coroutine[Any, Any, int | None] | None = None
) -> list[str]:
    sink = ListSink()
    locale = PersonLocales(Catalogs(), None).default()
    await guarded(key, sink, locale, work or _refused(), Once.done(), outage)
    await sink.finish()
    return [reply for reply in sink.replies if reply]  # an empty reply sends nothing


async def test_a_session_is_told_once_per_outage_and_again_after_a_completed_turn() -> None:
    clock = Clock()
    outage = Outage(clock)
    assert await _turn(outage, "alice") == [APOLOGY]
    for _ in range(5):  # the sweep tries her queued message again and again
        clock.now += 2
        assert await _turn(outage, "alice") == []
    assert await _turn(outage, "bob") == [APOLOGY]  # another person: told once too
    assert outage.seconds() == pytest.approx(10.0)
    assert await _turn(outage, "bob", _answered()) == []  # the store answers again
    assert outage.seconds() is None
    assert await _turn(outage, "alice") == [APOLOGY]  # a new outage


async def test_an_outage_with_no_failure_for_a_while_is_over() -> None:
    clock = Clock()
    outage = Outage(clock)
    await _turn(outage, "alice")
    clock.now += Outage.QUIET + 1
    assert outage.seconds() is None  # /healthz is ready again though nothing was tried
    assert await _turn(outage, "alice") == [APOLOGY]


async def test_a_message_not_stored_yet_gets_no_apology_but_not_stored_error() -> None:
    sink = ListSink()
    locale = PersonLocales(Catalogs(), None).default()
    with pytest.raises(NotStoredError):
        await guarded("alice", sink, locale, _refused(), Once(None), Outage())
    assert sink.replies == [] and sink.unfinished == ""

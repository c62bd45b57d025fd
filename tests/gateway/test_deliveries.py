"""A command or a button press delivered twice runs once: given to two replicas on one
PostgreSQL at once, or to one process again (a restart fetches it again), the second does
nothing visible; a message without an id (the console) is never taken for a duplicate;
a store that cannot say leaves the command unconfirmed, sent again and run then."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.app import Services, open_services
from gateway.config import load_config
from gateway.conversation import Conversations
from gateway.errors import NotStoredError
from memory_core import SearchScope
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import SKILLS, private, serving
from tests.gateway.sinks import ListSink
from tests.gateway.test_not_stored import _writes, on_postgres

ALICE = "alice"
FRESH = "Started a fresh session."
NOTICES_OFF = "Background notices: off (nothing is said when I learn something)."


@contextlib.asynccontextmanager
async def replicas(
    pg_database: str, tmp_path: Path
) -> AsyncIterator[list[tuple[Services, Conversations]]]:
    """Two full stacks, each from its own data dir, on one database."""
    async with contextlib.AsyncExitStack() as stack:
        model = await stack.enter_async_context(FakeOpenAI(echo_when_idle=True))
        built = []
        for name in ("a", "b"):
            env = {
                "OPENAI_BASE_URL": model.url + "/v1",
                "MNEMO_HOME": str(tmp_path / name),
                "MNEMO_SKILLS_DIR": str(SKILLS),
                "MNEMO_DATABASE_URL": pg_database,
            }
            services = await stack.enter_async_context(
                open_services(load_config(None, environ=env))
            )
            conversations = serving(services)
            stack.push_async_callback(conversations.close)
            built.append((services, conversations))
        yield built


async def handled(conversations: Conversations, text: str, message_id: str | None) -> ListSink:
    sink = ListSink()
    await conversations.handle(private(text, ALICE, message_id), sink)
    return sink


async def pressed(conversations: Conversations, payload: str, message_id: str) -> ListSink:
    sink = ListSink()
    await conversations.choose(private("", ALICE, message_id), payload, sink)
    return sink


def said(*sinks: ListSink) -> list[str]:
    """What the person saw of these replies: the lines not empty."""
    return [reply for sink in sinks for reply in sink.replies if reply]


async def test_a_command_given_to_two_replicas_and_again_after_a_restart_runs_once(
    pg_database: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with replicas(pg_database, tmp_path) as [(store, a), (_, b)]:
        assert said(await handled(a, "hello", "1")) == ["echo: hello"]
        with caplog.at_level(logging.INFO, logger="gateway.deliveries"):
            both = await asyncio.gather(handled(a, "/new", "2"), handled(b, "/new", "2"))
            again = await handled(b, "/new", "2")  # fetched again later
        assert said(*both, again) == [FRESH]  # one line, once
        assert sorted(len(sink.replies) for sink in (*both, again)) == [1, 1, 1]  # all finished
        assert caplog.text.count("delivered again: not run again") == 2
        assert said(await handled(b, "hi again", "3")) == ["echo: hi again"]
        assert said(await handled(a, "/new", "4")) == [FRESH]  # the next /new is its own
        sessions = await store.sessions.list_sessions(SearchScope(f"telegram-{ALICE}"))
        assert [s.end_reason for s in sessions] == ["new", "new"]  # two, as asked


async def test_a_button_press_given_to_two_replicas_is_answered_once(
    pg_database: str, tmp_path: Path
) -> None:
    async with replicas(pg_database, tmp_path) as [(_, a), (_, b)]:
        shown = await handled(a, "/settings", "10")
        off = next(c for c in shown.buttons if c.label == "Notices: off")
        both = await asyncio.gather(pressed(a, off.payload, "11"), pressed(b, off.payload, "11"))
        assert said(*both) == [NOTICES_OFF]  # never "not valid any more" beside it
        assert sorted(len(sink.replies) for sink in both) == [1, 1]


async def test_one_process_runs_a_command_again_only_when_it_has_no_id(
    services: Services,
) -> None:
    """SQLite, one process: a command fetched again is not run again; the console's
    messages and presses carry no id, and each runs."""
    bot = serving(services)
    assert said(await handled(bot, "/new", "7"), await handled(bot, "/new", "7")) == [FRESH]
    assert said(await handled(bot, "/new", None), await handled(bot, "/new", None)) == [FRESH] * 2
    shown = await handled(bot, "/settings", None)
    off = next(c for c in shown.buttons if c.label == "Notices: off")
    first, second = ListSink(), ListSink()
    await bot.choose(private("", ALICE), off.payload, first)
    await bot.choose(private("", ALICE), off.payload, second)
    assert said(first) == [NOTICES_OFF] and "not valid any more" in said(second)[0]


async def test_a_command_the_store_cannot_check_is_not_confirmed_then_runs_once_sent_again(
    services: Services, fresh_database: str
) -> None:
    async with on_postgres(services, fresh_database) as (bot, _):
        _writes(fresh_database, allowed=False)
        confirmed: list[str] = []
        sink = ListSink()
        with pytest.raises(NotStoredError):
            await bot.handle(private("/new", ALICE, "8"), sink, lambda: confirmed.append("x"))
        assert confirmed == [] and sink.replies == []  # Telegram sends it again
        _writes(fresh_database, allowed=True)
        sinks = [ListSink(), ListSink()]
        for again in sinks:
            await bot.handle(private("/new", ALICE, "8"), again, lambda: confirmed.append("x"))
        assert confirmed == ["x", "x"] and said(*sinks) == [FRESH]

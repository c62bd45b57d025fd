"""/healthz and /metrics of `mnemo run` (an in-process `Service`) against the fake
Telegram and the fake model: ready only once Telegram answered and while the storage
answers, not ready from the first stop signal while a turn still drains, and the turns
of the run counted in the Prometheus text format."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.config import Config, HealthConfig, StorageConfig, TelegramConfig, storage_settings
from gateway.errors import ConfigError
from gateway.health import store_problem
from gateway.service import Service
from memory_core import SessionBackend, open_storage
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall
from tests.fakes.telegram import FakeTelegram
from tests.gateway.serving import config_for
from tests.timing import scaled

TOKEN = "123:ABC"
ALICE, BOB = 1001, 1002


class HeldTelegram(FakeTelegram):
    """The fake Bot API, whose getMe waits until the test lets it answer."""

    def __init__(self) -> None:
        super().__init__(token=TOKEN)
        self.asked = asyncio.Event()  # getMe came in (and waits)
        self.answer_get_me = asyncio.Event()

    async def _api_getMe(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.set()
        await self.answer_get_me.wait()
        return await super()._api_getMe(params)


def configured(model: FakeOpenAI, tg: FakeTelegram, home: Path) -> Config:
    base = config_for(model.url, home)
    telegram = TelegramConfig(
        token=TOKEN,
        base_url=tg.url + "/bot",
        base_file_url=tg.url + "/file/bot",
        edit_interval=0.05,
        allowed_users=(str(ALICE), str(BOB)),
    )
    health = HealthConfig(enabled=True, listen="127.0.0.1", port=0)
    return base.model_copy(update={"telegram": telegram, "health": health})


@contextlib.asynccontextmanager
async def running(service: Service) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(service.run())
    try:
        yield task
    finally:
        service.request_stop("test over")
        await asyncio.wait_for(task, scaled(30))


async def get(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.text()


async def health_port(service: Service, task: asyncio.Task[None]) -> int:
    await wait_until(lambda: service.health is not None or task.done(), 10)
    assert service.health is not None and service.health.port, task
    return service.health.port


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples called `name` in the exposition `text`, by their labels."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


async def test_healthz_is_ready_only_after_telegram_answered(tmp_path: Path) -> None:
    async with FakeOpenAI(chunk_size=8) as model, HeldTelegram() as tg:
        config = configured(model, tg, tmp_path / "data")
        adapter = TelegramAdapter(config.telegram)
        service = Service(config, [adapter], signals=(), registry=CollectorRegistry())
        async with running(service) as task:
            port = await health_port(service, task)
            await wait_until(lambda: tg.asked.is_set() or task.done(), 10)
            status, body = await get(port, "/healthz")
            assert (status, body) == (503, "not ready\ntelegram: not connected\n")
            assert tg.calls_to("getMe") == []  # nothing has answered yet
            tg.answer_get_me.set()
            await tg.wait_until(lambda: tg.calls_to("deleteWebhook") != [], 10)
            await wait_until(lambda: task.done() or adapter.ready.is_set(), 10)
            assert (await get(port, "/healthz")) == (200, "ready\n")
        with pytest.raises(aiohttp.ClientConnectionError):
            await get(port, "/healthz")  # the bot stopped: nothing answers any more


@dataclass
class Serving:
    """A bot serving the fake Telegram with /metrics on, ready: its fakes, registry, port."""

    model: FakeOpenAI
    tg: FakeTelegram
    registry: CollectorRegistry
    port: int


@contextlib.asynccontextmanager
async def serving_metrics(tmp_path: Path) -> AsyncIterator[Serving]:
    async with FakeOpenAI(chunk_size=8) as model, FakeTelegram(token=TOKEN) as tg:
        config = configured(model, tg, tmp_path / "data")
        registry = CollectorRegistry()
        adapter = TelegramAdapter(config.telegram)
        service = Service(config, [adapter], signals=(), registry=registry)
        async with running(service) as task:
            port = await health_port(service, task)
            await wait_until(lambda: task.done() or adapter.ready.is_set(), 10)
            yield Serving(model, tg, registry, port)


async def test_metrics_count_the_turns_of_the_run(tmp_path: Path) -> None:
    async with serving_metrics(tmp_path) as bot:
        model, tg, registry = bot.model, bot.tg, bot.registry
        model.say("Good morning, Alice.")
        tg.inject_text(ALICE, ALICE, "good morning")
        await tg.wait_until(lambda: _shown(tg, ALICE, "Good morning, Alice."), 10)
        model.fail_next(Fault.http(400))  # Bob's turn fails: no reply, one model error
        tg.inject_text(BOB, BOB, "hello there")
        await wait_until(lambda: _turns(registry, "no_reply") >= 1, 10)
        model.say("Hello again.")
        tg.inject_text(ALICE, ALICE, "and again")
        await tg.wait_until(lambda: _shown(tg, ALICE, "Hello again."), 10)
        await wait_until(lambda: _turns(registry, "replied") >= 2, 10)
        status, text = await get(bot.port, "/metrics")
    assert status == 200
    turns = samples(text, "mnemo_turns_total")
    assert turns == {
        (("outcome", "replied"), ("platform", "telegram")): 2.0,
        (("outcome", "no_reply"), ("platform", "telegram")): 1.0,
    }
    latency = samples(text, "mnemo_turn_seconds_count")
    assert latency == {(("platform", "telegram"),): 3.0}
    assert samples(text, "mnemo_model_calls_total") == {(("client", "main"),): 3.0}
    errors = samples(text, "mnemo_model_errors_total")
    assert errors == {(("client", "main"), ("error", "ModelError")): 1.0}
    assert samples(text, "mnemo_model_call_seconds_count") == {(("client", "main"),): 3.0}
    assert samples(text, "mnemo_session_queue_depth") == {(("platform", "telegram"),): 0.0}
    assert samples(text, "mnemo_adapter_ready") == {(("platform", "telegram"),): 1.0}
    jobs = samples(text, "mnemo_background_jobs")
    assert set(jobs) == {(("state", "running"),), (("state", "scheduled"),)}


def _turns(registry: CollectorRegistry, outcome: str) -> float:
    value = registry.get_sample_value(
        "mnemo_turns_total", {"platform": "telegram", "outcome": outcome}
    )
    return value or 0.0


def _shown(tg: FakeTelegram, chat_id: int, text: str) -> bool:
    return text in tg.chat_texts(chat_id)


async def test_a_health_port_in_use_is_one_line(tmp_path: Path) -> None:
    async with FakeOpenAI(chunk_size=8) as model, FakeTelegram(token=TOKEN) as tg:
        config = configured(model, tg, tmp_path / "data")
        health = HealthConfig(enabled=True, listen="127.0.0.1", port=tg.port or 0)
        config = config.model_copy(update={"health": health})  # the fake holds that port
        service = Service(config, [TelegramAdapter(config.telegram)], signals=())
        with pytest.raises(ConfigError, match=r"^config error: health: cannot listen on 127"):
            await asyncio.wait_for(service.run(), scaled(10))
        assert tg.calls == []  # it stopped before connecting anything


class Watched(TelegramAdapter):
    """The Telegram adapter, noting what /healthz said when the service stopped it."""

    port = 0
    health_at_stop: tuple[int, str] | None = None

    async def stop(self) -> None:
        if self.health_at_stop is None:
            self.health_at_stop = await get(self.port, "/healthz")
        await super().stop()


async def test_a_stop_turns_not_ready_first_and_the_turn_in_flight_still_finishes(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI(chunk_size=8) as model, FakeTelegram(token=TOKEN) as tg:
        config = configured(model, tg, tmp_path / "data")
        adapter = Watched(config.telegram)
        service = Service(config, [adapter], signals=(), registry=CollectorRegistry())
        task = asyncio.create_task(service.run())
        adapter.port = await health_port(service, task)
        await wait_until(lambda: task.done() or adapter.ready.is_set(), 10)
        assert (await get(adapter.port, "/healthz")) == (200, "ready\n")
        model.say("Here is your answer, Alice.")
        model.fail_next(Fault.stall())  # Alice's turn is held at the model
        tg.inject_text(ALICE, ALICE, "a slow question")
        await wait_until(lambda: model.stalled == 1 or task.done(), 10)

        service.request_stop("SIGTERM")  # what the signal handler does
        await wait_until(lambda: adapter.health_at_stop is not None or task.done(), 10)
        assert adapter.health_at_stop == (503, "not ready\nstopping\n")  # before the stop
        assert (await get(adapter.port, "/healthz")) == (503, "not ready\nstopping\n")
        assert not task.done() and not _shown(tg, ALICE, "Here is your answer, Alice.")

        model.release()  # the drain: the turn in flight finishes, then the service exits
        await asyncio.wait_for(task, scaled(15))
        assert _shown(tg, ALICE, "Here is your answer, Alice.")
        with pytest.raises(aiohttp.ClientConnectionError):
            await get(adapter.port, "/healthz")


class HungSessions:
    """A session store whose reads never come back (a PostgreSQL that stopped answering)."""

    def __init__(self) -> None:
        self.asked = 0

    async def get_session(self, session_id: int) -> None:
        self.asked += 1
        await asyncio.Event().wait()


class FailingSessions:
    async def get_session(self, session_id: int) -> None:
        raise OSError("connection to postgresql://mnemo:s3cret@db/mnemo refused")


def on_postgres(home: Path, url: str = "postgresql://mnemo@db/mnemo") -> Config:
    return Config(home=home, storage=StorageConfig(url=url))


async def test_on_postgresql_ready_only_while_the_database_answers(
    tmp_path: Path, pg_database: str
) -> None:
    config = on_postgres(tmp_path / "absent", pg_database)  # no data dir needed at all
    async with open_storage(storage_settings(config)) as storage:
        assert await store_problem(config, storage.sessions) is None
    assert await store_problem(config, storage.sessions) == (
        "PostgreSQL: SessionStoreError: the session store is not open"
    )
    hung = HungSessions()
    problem = await store_problem(config, cast(SessionBackend, hung), timeout=0.05)
    assert (problem, hung.asked) == ("PostgreSQL did not answer within 0.05 s", 1)
    problem = await store_problem(config, cast(SessionBackend, FailingSessions()))
    assert problem == "PostgreSQL: OSError: connection to postgresql://***@db/mnemo refused"


async def test_on_sqlite_the_data_directory_must_be_writable(tmp_path: Path) -> None:
    config = Config(home=tmp_path)
    hung = cast(SessionBackend, HungSessions())  # not asked: SQLite is checked on disk
    assert await store_problem(config, hung) is None
    missing = Config(home=tmp_path / "gone")
    assert (await store_problem(missing, hung) or "").startswith(f"{tmp_path / 'gone'} is not")


async def test_metrics_count_the_entries_dropped_as_not_grounded(tmp_path: Path) -> None:
    async with serving_metrics(tmp_path) as bot:
        guess = {"target": "user", "action": "add", "content": "Lives in Zanzibar"}
        bot.model.call_tools(ToolCall("memory", guess))  # her turn's own call: a guess
        bot.model.say("Zanzibar, I bet.")
        bot.tg.inject_text(ALICE, ALICE, "guess which city I live in")
        await bot.tg.wait_until(lambda: _shown(bot.tg, ALICE, "Zanzibar, I bet."), 10)
        status, text = await get(bot.port, "/metrics")
    assert status == 200
    dropped = samples(text, "mnemo_memory_writes_dropped_total")
    assert dropped == {(("job", "turn"), ("verdict", "not_said")): 1.0}
    assert "Zanzibar" not in text

"""`mnemo run` as a long-running service (and `mnemo chat`, the console alone).

`Service.run` runs what `gateway.app` builds: on SQLite it holds the data
directory's lock (``<home>/mnemo.lock``: one instance per directory; on
PostgreSQL any number of replicas may run, see `gateway.replicas`), opens the bot,
starts the background work and every adapter, answers the messages stored but
not answered before the last stop, and serves until SIGINT/SIGTERM or until
an adapter ends by itself (the console at the end of its input).

Stopping: the adapters stop taking updates, the turns in flight get
`shutdown_grace` seconds to finish (a person's message is stored before the
model is asked, so one cut short is answered after the restart), the
background work gets its own grace, then the adapters close and the cached
sessions' providers stop. Sessions stay open in state.db: they resume at the
next start. A second signal during the stop skips what is left of the graces.

Logs: one line when serving starts, when a stop begins and ends, and for each
error; never message text. Secrets (the bot tokens, the API key) are masked in
every log line, tracebacks included.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO, TypeVar

from filelock import FileLock, Timeout
from prometheus_client import CollectorRegistry, ProcessCollector

from gateway.adapters.console_adapter import ConsoleAdapter
from gateway.app import Bot, console_adapter, open_bot, platform_adapters
from gateway.config import Config, storage_settings
from gateway.conversation import Conversations
from gateway.errors import AdapterFailedError, ConfigError, GatewayError, InstanceLockedError
from gateway.health import HealthServer
from gateway.logs import configure_logging
from gateway.messages import Adapter, CommandSpec, InboundMessage, ReplySink
from gateway.preflight import check_startup, model_setup_note
from gateway.replicas import STALE, SWEEP_EVERY, UNANSWERED_WITHIN, stored_inbound
from gateway.session_order import SessionOrder
from gateway.session_queue import SessionQueue
from memory_core import SessionBackend, describe_storage

log = logging.getLogger("mnemo")

LOCK_NAME = "mnemo.lock"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
MIN_SECRET_LENGTH = 8
T = TypeVar("T")


def run_bot(config: Config, console: bool = False) -> None:
    """`mnemo run`: every enabled platform adapter, else the console when stdin is a
    terminal (`console` adds it in any case); INFO logs to stderr. With neither, one
    `ConfigError` line: under a supervisor a console on a closed stdin would end at once
    and exit 0, and a restart policy would loop on it silently. A set-up mistake
    (`check_startup`) is one `ConfigError` line before anything starts."""
    check_startup(config)
    adapters, modes = platform_adapters(config)
    if console or (not adapters and _stdin_is_terminal()):
        language = config.locale.language
        adapters.append(console_adapter(sys.stdin, sys.stdout, home=config.home, language=language))
    if not adapters:
        raise ConfigError(
            "no platform to serve: set TELEGRAM_BOT_TOKEN or DISCORD_BOT_TOKEN (stdin is "
            "not a terminal, so there is no console; `mnemo run --console` forces one)"
        )
    configure_logging(logging.INFO, _secrets(config), config.logging.format)
    registry = CollectorRegistry()  # this bot's own: /metrics shows it and the process
    ProcessCollector(registry=registry)
    asyncio.run(Service(config, adapters, modes, registry=registry).run())


def run_console(
    config: Config,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    user_id: str | None = None,
) -> None:
    """`mnemo chat`: the console adapter alone (through the given streams in tests);
    warnings only on stderr. `user_id` names the person, by default the login name."""
    configure_logging(logging.WARNING, _secrets(config), config.logging.format)
    adapter = console_adapter(
        stdin or sys.stdin,
        stdout or sys.stdout,
        user_id=user_id,
        home=config.home,
        language=config.locale.language,
    )
    asyncio.run(Service(config, [adapter]).run())


class Service:
    """One running bot: its adapters, conversations and background work."""

    def __init__(
        self,
        config: Config,
        adapters: Sequence[Adapter],
        modes: Mapping[str, str] | None = None,
        signals: Sequence[signal.Signals] = STOP_SIGNALS,
        registry: CollectorRegistry | None = None,
    ) -> None:
        """`modes`: platform -> how it serves ("polling"), for the start line; `signals`:
        those that stop the service (installed only in the main thread); `registry`:
        where the bot's metrics go (None: a registry of its own)."""
        self._config = config
        self._registry = registry
        self.health: HealthServer | None = None  # /healthz and /metrics, while serving
        self._adapters = list(adapters)
        self._modes = dict(modes or {})
        self._signals = tuple(signals)
        self._stopping = asyncio.Event()
        self._hurry = asyncio.Event()

    def request_stop(self, reason: str) -> None:
        """Begin a graceful stop; asked again while stopping, stop faster."""
        if self._stopping.is_set():
            if not self._hurry.is_set():
                log.info("stopping now (%s again): the rest of the grace is skipped", reason)
                self._hurry.set()
            return
        log.info("stopping (%s)", reason)
        self._stopping.set()

    async def run(self) -> None:
        """Serve until stopped. Raises `InstanceLockedError` when another instance holds
        the data directory, `AdapterFailedError` when an adapter fails."""
        replicas = storage_settings(self._config).url is not None  # no data-dir lock then
        lock = contextlib.nullcontext() if replicas else instance_lock(self._config.home)
        asyncio.get_running_loop().set_exception_handler(AcceptFailures().handle)
        with lock, self._signal_handlers():
            async with (
                open_bot(self._config, self._adapters, self._registry) as bot,
                self._health_server(bot),
            ):
                await self._serve(bot)
        log.info("stopped")

    @contextlib.asynccontextmanager
    async def _health_server(self, bot: Bot) -> AsyncIterator[None]:
        """/healthz and /metrics from before the adapters start until the bot closes,
        when `health.enabled`; an address it cannot listen on is one `ConfigError` line."""
        settings = self._config.health
        if not settings.enabled:
            yield
            return
        server = HealthServer(settings, bot, self._adapters, self._stopping)
        try:
            await server.start()
        except OSError as exc:
            raise ConfigError(
                f"config error: health: cannot listen on {settings.listen}:{settings.port} "
                f"({exc.strerror or exc})"
            ) from None
        self.health = server
        try:
            yield
        finally:
            self.health = None
            await server.close()

    async def _serve(self, bot: Bot) -> None:
        conversations = bot.conversations
        bot.background.start(conversations.sessions.end_quiet)  # the first sweep: what is due
        started: list[Adapter] = []
        catch_up: asyncio.Task[None] | None = None
        ended: Adapter | None = None
        try:
            for adapter in self._adapters:
                if isinstance(adapter, ConsoleAdapter):  # its banner in the person's language
                    adapter.speak(conversations.locales.of_person(adapter.user_key).translator)
                if conversations.order is not None:  # replies to what another replica got
                    conversations.order.serve_platform(adapter.platform, adapter.reply_sink)
                await _start(adapter, conversations, conversations.menu)
                started.append(adapter)
                if adapter.done.is_set() and adapter.platform != "console":
                    raise AdapterFailedError(
                        f"the {adapter.platform} adapter failed to start (its error is logged "
                        "above)"
                    )
            if not self._stopping.is_set():  # a stop asked for during start-up: no catch-up
                note = model_setup_note(self._config)
                if note is not None:
                    log.warning(note)
                log.info(
                    "serving %s with data in %s and skills in %s",
                    self._describe(),
                    describe_storage(storage_settings(self._config)),
                    self._config.skills.dir.resolve(),
                )
                gc.freeze()  # what start-up built lives all run: later collections skip it
                catch_up = asyncio.create_task(self._answer_unanswered(bot))
                ended = await self._wait(started)
        finally:
            await self._shutdown(started, bot, catch_up)
        if ended is not None and ended.platform != "console":
            raise AdapterFailedError(
                f"the {ended.platform} adapter stopped by itself (its error is logged above)"
            )

    async def _wait(self, adapters: Sequence[Adapter]) -> Adapter | None:
        """Wait for a stop request or for an adapter to end; the adapter that ended, if one."""
        waits = {asyncio.create_task(a.done.wait()): a for a in adapters}
        stop = asyncio.create_task(self._stopping.wait())
        finished, _ = await asyncio.wait([stop, *waits], return_when=asyncio.FIRST_COMPLETED)
        for task in [stop, *waits]:
            task.cancel()
        if stop in finished:
            return None
        ended = next(waits[t] for t in finished if t in waits)
        log.info("stopping (the %s adapter ended)", ended.platform)
        self._stopping.set()
        return ended

    async def _answer_unanswered(self, bot: Bot) -> None:
        """Answer what each platform stored but did not answer before the last stop; with
        replicas, then sweep for what a dead replica left, every `SWEEP_EVERY` seconds."""
        order = bot.conversations.order
        if order is not None:
            await sweep_forever(order)
            return
        for adapter in self._adapters:
            try:
                count = await answer_unanswered(
                    bot.conversations,
                    bot.services.sessions,
                    adapter.platform,
                    adapter.reply_sink,
                )
            except Exception:  # the top of a task: log it, keep serving
                log.exception("answering the %s messages left unanswered failed", adapter.platform)
                continue
            if count:
                log.info("answered %d %s messages left unanswered", count, adapter.platform)

    async def _shutdown(
        self,
        started: Sequence[Adapter],
        bot: Bot,
        catch_up: asyncio.Task[None] | None,
    ) -> None:
        conversations = bot.conversations
        for adapter in started:
            await _quietly(adapter.stop(), f"stopping the {adapter.platform} adapter")
        drained = await self._unless_hurried(conversations.drain(self._config.shutdown_grace))
        if not drained:
            log.info("turns in flight were cut short (the people's messages are stored)")
        if catch_up is not None:
            catch_up.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await catch_up
        await self._unless_hurried(bot.background.close())
        for adapter in started:
            await _quietly(adapter.close(), f"closing the {adapter.platform} adapter")
        await conversations.close()

    async def _unless_hurried(self, work: Awaitable[T]) -> T | None:
        """`work`'s result, or None when a second stop request comes first (it is cancelled)."""
        task = asyncio.ensure_future(work)
        hurry = asyncio.create_task(self._hurry.wait())
        await asyncio.wait([task, hurry], return_when=asyncio.FIRST_COMPLETED)
        hurry.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None

    def _describe(self) -> str:
        names = []
        for adapter in self._adapters:
            mode = self._modes.get(adapter.platform)
            names.append(adapter.platform if mode is None else f"{adapter.platform} ({mode})")
        return " and ".join(names)

    @contextlib.contextmanager
    def _signal_handlers(self) -> Iterator[None]:
        """SIGINT/SIGTERM request a stop (a second one, a faster stop) while serving."""
        if threading.current_thread() is not threading.main_thread():
            yield  # signal handlers can only be set from the main thread
            return
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.add_signal_handler(sig, self.request_stop, sig.name)
        try:
            yield
        finally:
            for sig in self._signals:
                loop.remove_signal_handler(sig)


async def answer_unanswered(
    conversations: Conversations,
    store: SessionBackend,
    platform: str,
    sink_for: Callable[[InboundMessage], ReplySink],
    within: float = UNANSWERED_WITHIN,
) -> int:
    """Answer the messages of `platform` stored in the last `within` seconds and never
    answered (the process stopped mid-turn), then those still waiting in the session
    queue (they arrived while their session was busy); how many. Run at start-up."""
    pending = await store.unanswered(platform, time.time() - within)
    answered = 0
    done: set[tuple[str, str]] = set()  # (session key, platform message id) answered here
    for info, stored in pending:
        message = stored_inbound(platform, info, stored)
        if message is None or message.message_id is None:
            continue  # no platform id, or sessions are keyed differently now: leave it
        await conversations.handle(message, sink_for(message))
        answered += 1
        done.add((info.session_key or "", message.message_id))
    queue = SessionQueue(store)
    for waiting in await queue.waiting(platform):  # they came after those: answered after
        message = waiting.message
        fresh = waiting.received_at >= time.time() - within
        if fresh and (message.session_key(), message.message_id or "") not in done:
            await conversations.handle(message, sink_for(message))  # (a stored copy wins)
            answered += 1
        await queue.drop(waiting.queue_id)
    return answered


async def sweep_forever(order: SessionOrder, every: float = SWEEP_EVERY) -> None:
    """Take over what replicas left (`SessionOrder.sweep`): at once everything (this
    replica just started), then every `every` seconds what waited longer than `STALE`."""
    stale = 0.0
    while True:
        try:
            count = await order.sweep(stale)
        except Exception:  # the top of a task: log it, sweep again later
            log.exception("the sweep for sessions left by other replicas failed")
        else:
            if count:
                log.info("answered %d messages that were waiting for another replica", count)
        stale = STALE
        await asyncio.sleep(every)


async def _start(
    adapter: Adapter, conversations: Conversations, commands: Sequence[CommandSpec]
) -> None:
    """Start one adapter; its failure is one `AdapterFailedError` line (traceback logged)."""
    try:
        await adapter.start(conversations, commands)
    except GatewayError:
        raise
    except Exception as exc:  # the top of an adapter's start: log it, stop the service
        log.exception("the %s adapter failed to start", adapter.platform)
        raise AdapterFailedError(
            f"the {adapter.platform} adapter failed to start: {type(exc).__name__}: {exc}"
        ) from None


async def _quietly(work: Awaitable[None], what: str) -> None:
    """Run one step of the stop; a failure is logged and the stop goes on."""
    try:
        await work
    except Exception:  # the top of a stop step: the remaining steps still run
        log.exception("%s failed", what)


class AcceptFailures:
    """The event loop's exception handler: a connection the loop could not accept (open
    files at their limit: a flood of clients) is one counted line a minute, not a
    traceback each time (the loop retries by itself); anything else goes to the default."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._count = 0
        self._logged_at: float | None = None

    def handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != "socket.accept() out of system resource":
            loop.default_exception_handler(context)
            return
        self._count += 1
        now = self._clock()
        if self._logged_at is None or now - self._logged_at >= 60:
            self._logged_at = now
            exc = context.get("exception")
            log.warning(
                "could not accept a connection: %s (%d so far; the open-files limit?)",
                getattr(exc, "strerror", None) or exc,
                self._count,
            )


@contextlib.contextmanager
def instance_lock(home: Path) -> Iterator[None]:
    """Hold ``<home>/mnemo.lock`` for the block; `InstanceLockedError` if another holds it,
    `ConfigError` (one line) when the data directory cannot be made or locked there."""
    lock = FileLock(str(home / LOCK_NAME), blocking=False)
    try:
        home.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except Timeout:  # an OSError too: asked first
        raise InstanceLockedError(
            f"another mnemo is already running with data in {home.resolve()}; stop it first "
            "(or use a different MNEMO_HOME)"
        ) from None
    except OSError as exc:  # a permission check can pass where making fails (root, /proc)
        raise ConfigError(
            f"config error: home: cannot make or lock the data directory {home.absolute()}: "
            f"{exc.strerror or exc} (set home or MNEMO_HOME)"
        ) from None
    try:
        yield
    finally:
        lock.release()


def _stdin_is_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


def _secrets(config: Config) -> list[str]:
    """The values to mask; short ones (placeholder keys such as "x") would mask plain words."""
    values = (config.telegram.token, config.discord.token, config.llm.api_key)
    return [s for s in values if s and len(s) >= MIN_SECRET_LENGTH]

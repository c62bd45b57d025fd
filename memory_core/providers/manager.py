"""The memory manager: one session's providers, driven safely.

The built-in layer is always there (the history recall provider unless it is
turned off); beside it at most one external provider. Every call into a
provider runs as its own task under a timeout: a provider that is slow, hangs
(even one that ignores cancellation) or raises is logged and skipped, and the
turn goes on. `prefetch_all` runs on the reply path and never takes longer
than its timeout; writes (`sync_all`, `end_session`) and warm-ups
(`queue_prefetch_all`) go to a `BackgroundWorker` (`worker.py`), in order per
session.
Background agents (review, extraction) get recall but cause no provider
writes and see no provider tools.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

from memory_core.context import sanitize_context
from memory_core.errors import ProviderError
from memory_core.fence import ErasureFence, current_mark
from memory_core.providers.base import (
    MemoryProvider,
    SessionContext,
    TranscriptMessage,
    schema_tool_name,
)
from memory_core.providers.worker import BackgroundWorker

log = logging.getLogger(__name__)

T = TypeVar("T")


class MemoryManager:
    """The providers of one session, called concurrently, each under a timeout.

    `core_tool_names` are the bot's own tools; a provider tool with one of
    those names (or one another provider already offers) is ignored with a
    warning. `prefetch_timeout` bounds `prefetch_all`; `call_timeout` bounds
    every other provider call; `drain_timeout` bounds the wait for queued
    background work at `shutdown`. A queued write (`sync_all`, `end_session`)
    whose person was erased after the work that queued it began is dropped
    (`fence`, shared with the stores).
    """

    def __init__(
        self,
        builtins: Sequence[MemoryProvider] = (),
        *,
        external: MemoryProvider | None = None,
        core_tool_names: Collection[str] = (),
        prefetch_timeout: float = 3.0,
        call_timeout: float = 10.0,
        drain_timeout: float = 5.0,
        worker: BackgroundWorker | None = None,
        fence: ErasureFence | None = None,
    ) -> None:
        self._providers: list[MemoryProvider] = []
        self._external: MemoryProvider | None = None
        self._core_tools = frozenset(core_tool_names)
        self._prefetch_timeout = prefetch_timeout
        self._call_timeout = call_timeout
        self._drain_timeout = drain_timeout
        self._worker = worker if worker is not None else BackgroundWorker()
        self._fence = fence if fence is not None else ErasureFence()
        self._session: SessionContext | None = None
        self._routes: dict[str, MemoryProvider] = {}
        self._schemas: list[dict[str, Any]] = []
        self._stray: set[asyncio.Task[Any]] = set()
        self._closed = False
        for provider in builtins:
            self._check_new(provider)
            self._providers.append(provider)
        if external is not None:
            self.add_external(external)

    # -- membership ---------------------------------------------------------------

    @property
    def providers(self) -> tuple[MemoryProvider, ...]:
        """The active providers, built-in ones first."""
        return tuple(self._providers)

    @property
    def external(self) -> MemoryProvider | None:
        return self._external

    def add_external(self, provider: MemoryProvider) -> bool:
        """Add the external provider; a second one is refused (logged, returns False)."""
        if self._session is not None:
            raise ProviderError("providers are added before the manager is initialized")
        if self._external is not None:
            log.warning(
                "memory provider %r refused: %r is already the external provider "
                "(only one external provider at a time)",
                provider.name,
                self._external.name,
            )
            return False
        self._check_new(provider)
        self._external = provider
        self._providers.append(provider)
        return True

    def _check_new(self, provider: MemoryProvider) -> None:
        if not provider.name:
            raise ProviderError(f"{type(provider).__name__} has no provider name")
        if any(p.name == provider.name for p in self._providers):
            raise ProviderError(f"memory provider {provider.name!r} is already present")

    # -- calling providers ------------------------------------------------------------

    async def _call_all(
        self,
        what: str,
        providers: Sequence[MemoryProvider],
        call: Callable[[MemoryProvider], Awaitable[T]],
        timeout: float,
    ) -> list[T | None]:
        """Run `call` on every provider concurrently; None where it failed or timed out.

        Returns within `timeout` (plus scheduling): calls still running are
        cancelled and left to unwind on their own, never waited for. The call
        itself happens inside the task, so even a provider that raises before
        returning an awaitable only fails its own part.
        """
        if not providers:
            return []

        async def one(provider: MemoryProvider) -> T:
            return await call(provider)

        tasks = [asyncio.ensure_future(one(p)) for p in providers]
        try:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
        except asyncio.CancelledError:  # the turn itself was cancelled: take the calls along
            for task in tasks:
                task.cancel()
            raise
        return [
            self._outcome(what, p, t, t in pending, timeout)
            for p, t in zip(providers, tasks, strict=True)
        ]

    def _outcome(
        self,
        what: str,
        provider: MemoryProvider,
        task: asyncio.Task[T],
        late: bool,
        timeout: float,
    ) -> T | None:
        if late:
            task.cancel()
            self._stray.add(task)
            task.add_done_callback(self._forget_stray)
            log.warning(
                "memory provider %r timed out after %.1f s on %s; skipped",
                provider.name,
                timeout,
                what,
            )
            return None
        if task.cancelled():
            log.warning("memory provider %r was cancelled during %s; skipped", provider.name, what)
            return None
        if (exc := task.exception()) is not None:
            log.warning(
                "memory provider %r failed on %s; skipped", provider.name, what, exc_info=exc
            )
            return None
        return task.result()

    def _forget_stray(self, task: asyncio.Task[Any]) -> None:
        self._stray.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("a timed-out memory provider call failed later", exc_info=task.exception())

    def _require_session(self) -> SessionContext:
        if self._session is None:
            raise ProviderError("the memory manager is not initialized")
        return self._session

    # -- lifecycle ----------------------------------------------------------------------

    async def initialize(self, session: SessionContext) -> None:
        """Initialize every provider for `session`; one that fails is left out of it."""
        if self._session is not None:
            raise ProviderError("the memory manager is already initialized")
        self._session = session
        results = await self._call_all(
            "initialize", self._providers, lambda p: _initialized(p, session), self._call_timeout
        )
        self._providers = [p for p, ok in zip(self._providers, results, strict=True) if ok]
        if self._external not in self._providers:
            self._external = None
        self._build_routes()

    async def system_prompt_block(self) -> str:
        """The providers' static blocks for the frozen system prompt, cleaned and joined."""
        self._require_session()
        return _join(
            await self._call_all(
                "system_prompt_block",
                self._providers,
                lambda p: p.system_prompt_block(),
                self._call_timeout,
            )
        )

    async def prefetch_all(self, query: str) -> str:
        """Recall for this turn from every provider, cleaned and joined ("" for none).

        Call once per turn and reuse the result through the tool loop. Each
        provider has `prefetch_timeout` seconds; late or failing ones are skipped.
        """
        self._require_session()
        if not query.strip():
            return ""
        return _join(
            await self._call_all(
                "prefetch", self._providers, lambda p: p.prefetch(query), self._prefetch_timeout
            )
        )

    def sync_all(self, user_text: str, assistant_text: str) -> None:
        """After the reply: queue `sync_turn` on every provider (not for background agents)."""
        if self._writes_allowed("sync_turn"):
            self._submit("sync_turn", lambda p: p.sync_turn(user_text, assistant_text))

    def queue_prefetch_all(self, query: str) -> None:
        """After the reply: queue `queue_prefetch` on every provider to warm the next turn."""
        self._require_session()
        self._submit("queue_prefetch", lambda p: p.queue_prefetch(query))

    def end_session(self, messages: Sequence[TranscriptMessage]) -> None:
        """The session ended: queue `on_session_end` (not for background agents)."""
        if self._writes_allowed("on_session_end"):
            frozen = tuple(messages)
            self._submit("on_session_end", lambda p: p.on_session_end(frozen))

    def _writes_allowed(self, what: str) -> bool:
        session = self._require_session()
        if session.is_background:
            log.debug("%s skipped: background agents do not write to providers", what)
            return False
        return True

    def _submit(self, what: str, call: Callable[[MemoryProvider], Awaitable[None]]) -> None:
        session = self._require_session()
        if self._closed:
            log.warning(
                "memory %s for session %s dropped: the manager is shut down",
                what,
                session.session_id,
            )
            return
        providers = list(self._providers)
        began = current_mark()  # the job runs later, for the work that queued it

        async def job() -> None:
            if not self._fence.allows(session.user_key, began):
                log.info(
                    "memory %s for session %s dropped: the person was erased",
                    what,
                    session.session_id,
                )
                return
            await self._call_all(what, providers, call, self._call_timeout)

        self._worker.submit(session.session_id, f"{what} (session {session.session_id})", job)

    async def shutdown(self) -> None:
        """Drain this session's queued work (bounded), then shut providers down in reverse."""
        if self._closed:
            return
        self._closed = True
        if self._session is not None:
            await self._worker.drain(self._drain_timeout, key=self._session.session_id)
        for provider in reversed(self._providers):
            await self._call_all("shutdown", [provider], lambda p: p.shutdown(), self._call_timeout)
        for task in list(self._stray):
            task.cancel()

    async def erase_user(self, user_key: str) -> list[str]:
        """Ask every provider to erase `user_key`'s data; return one line per failure.

        Needs no session (call it on a fresh manager). Unlike the turn's calls,
        a failure is not only logged: the caller must tell the person.
        """
        failures: list[str] = []
        for provider in self._providers:
            try:
                await asyncio.wait_for(provider.erase_user(user_key), self._call_timeout)
            except TimeoutError:
                failures.append(f"{provider.name}: timed out after {self._call_timeout:.0f} s")
            except Exception as exc:  # a plugin's own error: reported, never raised
                log.warning("memory provider %r failed to erase a person", provider.name)
                failures.append(f"{provider.name}: {exc}")
        return failures

    # -- tools ----------------------------------------------------------------------------

    def _build_routes(self) -> None:
        self._routes, self._schemas = {}, []
        if self._require_session().is_background:
            return  # background agents work with the core memory and skills tools only
        for provider in self._providers:
            try:
                schemas = list(provider.tool_schemas())
            except Exception:  # one provider's broken schemas must not cost the session
                log.exception(
                    "memory provider %r tool_schemas failed; its tools are off", provider.name
                )
                continue
            for schema in schemas:
                name = schema_tool_name(schema)
                if name is None:
                    log.warning(
                        "memory provider %r offers a tool without a name; ignored", provider.name
                    )
                elif name in self._core_tools:
                    log.warning(
                        "memory provider %r tool %r clashes with a core tool; ignored",
                        provider.name,
                        name,
                    )
                elif name in self._routes:
                    log.warning(
                        "memory provider %r tool %r is already offered by %r; ignored",
                        provider.name,
                        name,
                        self._routes[name].name,
                    )
                else:
                    self._routes[name] = provider
                    self._schemas.append(dict(schema))

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The provider tools to offer the model (none for background agents)."""
        self._require_session()
        return [dict(schema) for schema in self._schemas]

    def owns_tool(self, name: str) -> bool:
        return name in self._routes

    async def handle_tool_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Route a tool call to the provider that offers `name`."""
        session = self._require_session()
        provider = self._routes.get(name)
        if provider is None:
            why = " to background agents" if session.is_background else ""
            raise ProviderError(f"no memory provider tool named {name!r} is available{why}")
        try:
            async with asyncio.timeout(self._call_timeout):
                return await provider.handle_tool_call(name, arguments)
        except TimeoutError as exc:
            raise ProviderError(
                f"memory provider {provider.name!r} did not answer {name!r} "
                f"within {self._call_timeout:.1f} s"
            ) from exc
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(
                f"memory provider {provider.name!r} failed on {name!r}: {exc}"
            ) from exc


async def _initialized(provider: MemoryProvider, session: SessionContext) -> bool:
    await provider.initialize(session)
    return True


def _join(results: Sequence[object]) -> str:
    cleaned = (sanitize_context(text) for text in results if isinstance(text, str))
    return "\n\n".join(text for text in cleaned if text)

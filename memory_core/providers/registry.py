"""Where memory providers are found by name.

Built-in providers register exactly like third-party ones: a name and a
factory that builds one provider instance (one per session) from the shared
`ProviderResources`. Installed plugins can add theirs through the entry-point
group ``mnemo.memory_providers`` (name = provider name, object = factory);
they are discovered only when `load_entry_points` is called, and each plugin
is imported only when it is actually created.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from memory_core.errors import ProviderError
from memory_core.providers.base import MemoryProvider
from memory_core.providers.history import HistoryRecallProvider, SessionSearcher

ENTRY_POINT_GROUP = "mnemo.memory_providers"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProviderResources:
    """What the bot shares with provider factories.

    `home` is the data directory (a provider with its own store keeps it under
    there); `sessions` is the session-history search, None when there is none.
    """

    home: Path
    sessions: SessionSearcher | None = None


ProviderFactory = Callable[[ProviderResources], MemoryProvider]


class _EntryPointFactory:
    """A factory that imports its plugin only when first used."""

    def __init__(self, entry_point: metadata.EntryPoint) -> None:
        self.entry_point = entry_point

    def __call__(self, resources: ProviderResources) -> MemoryProvider:
        try:
            factory: ProviderFactory = self.entry_point.load()
        except (ImportError, AttributeError) as exc:
            raise ProviderError(
                f"memory provider plugin {self.entry_point.name!r} "
                f"({self.entry_point.value}) could not be loaded: {exc}"
            ) from exc
        if not callable(factory):
            raise ProviderError(
                f"memory provider plugin {self.entry_point.name!r} ({self.entry_point.value}) "
                "is not a factory"
            )
        return factory(resources)


class ProviderRegistry:
    """Names to provider factories; `create` builds a provider for one session."""

    def __init__(self) -> None:
        self._factories: dict[str, ProviderFactory] = {}
        self._builtin: set[str] = set()

    def register(self, name: str, factory: ProviderFactory, *, builtin: bool = False) -> None:
        """Add a provider; a second registration of the same name is refused."""
        if not name or not name.strip():
            raise ProviderError("a memory provider needs a non-empty name")
        if name in self._factories:
            raise ProviderError(f"a memory provider named {name!r} is already registered")
        self._factories[name] = factory
        if builtin:
            self._builtin.add(name)

    def names(self) -> list[str]:
        return sorted(self._factories)

    def is_builtin(self, name: str) -> bool:
        return name in self._builtin

    def load_entry_points(
        self, entry_points: Iterable[metadata.EntryPoint] | None = None
    ) -> list[str]:
        """Register the installed plugins of ``mnemo.memory_providers``; return their names.

        A plugin whose name is already taken is skipped with a warning, so a
        stray package cannot replace a built-in provider.
        """
        if entry_points is None:
            entry_points = metadata.entry_points(group=ENTRY_POINT_GROUP)
        added: list[str] = []
        for entry_point in entry_points:
            if entry_point.name in self._factories:
                log.warning(
                    "memory provider plugin %r (%s) ignored: the name is already registered",
                    entry_point.name,
                    entry_point.value,
                )
                continue
            self.register(entry_point.name, _EntryPointFactory(entry_point))
            added.append(entry_point.name)
        return added

    def create(self, name: str, resources: ProviderResources) -> MemoryProvider:
        """Build the provider registered as `name` for one session."""
        factory = self._factories.get(name)
        if factory is None:
            known = ", ".join(self.names()) or "none"
            raise ProviderError(f"unknown memory provider {name!r} (known: {known})")
        provider = factory(resources)
        if not isinstance(provider, MemoryProvider):
            raise ProviderError(
                f"memory provider {name!r} built a {type(provider).__name__}, not a MemoryProvider"
            )
        if provider.name != name:
            raise ProviderError(
                f"memory provider registered as {name!r} calls itself {provider.name!r}"
            )
        return provider

    def create_selected(
        self, resources: ProviderResources, *, builtins: Sequence[str], external: str | None
    ) -> tuple[list[MemoryProvider], MemoryProvider | None]:
        """The built-ins named in `builtins` and the external one (`providers.external`)."""
        for name in builtins:
            if not self.is_builtin(name):
                raise ProviderError(f"memory provider {name!r} is not a built-in provider")
        if external is not None and self.is_builtin(external):
            raise ProviderError(
                f"providers.external: {external!r} is built in; name an external provider"
            )
        made = [self.create(name, resources) for name in builtins]
        return made, (self.create(external, resources) if external else None)


def _make_history(resources: ProviderResources) -> MemoryProvider:
    if resources.sessions is None:
        raise ProviderError("the history provider needs the session store")
    return HistoryRecallProvider(resources.sessions)


def default_registry() -> ProviderRegistry:
    """A registry holding the built-in providers (``history``)."""
    registry = ProviderRegistry()
    registry.register(HistoryRecallProvider.name, _make_history, builtin=True)
    return registry

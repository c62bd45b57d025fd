"""The provider registry: names, built-ins, entry-point plugins, selection."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from memory_core.errors import ProviderError
from memory_core.providers.base import MemoryProvider
from memory_core.providers.registry import (
    ENTRY_POINT_GROUP,
    ProviderRegistry,
    ProviderResources,
    default_registry,
)


class Echo(MemoryProvider):
    name = "echo"

    def __init__(self, resources: ProviderResources) -> None:
        self.home = resources.home

    async def prefetch(self, query: str) -> str:
        return f"echo: {query}"


def make_echo(resources: ProviderResources) -> MemoryProvider:
    """The factory the entry-point tests point at."""
    return Echo(resources)


NOT_A_FACTORY = 42


@pytest.fixture
def resources(tmp_path: Path) -> ProviderResources:
    return ProviderResources(home=tmp_path)


def test_register_and_create(resources: ProviderResources) -> None:
    registry = ProviderRegistry()
    registry.register("echo", Echo)
    provider = registry.create("echo", resources)
    assert isinstance(provider, Echo) and provider.home == resources.home
    assert registry.names() == ["echo"]
    assert not registry.is_builtin("echo")


def test_unknown_name_is_a_clear_error(resources: ProviderResources) -> None:
    registry = default_registry()
    with pytest.raises(ProviderError, match=r"unknown memory provider 'mem0' \(known: history\)"):
        registry.create("mem0", resources)


def test_duplicate_and_empty_names_are_refused() -> None:
    registry = ProviderRegistry()
    registry.register("echo", Echo)
    with pytest.raises(ProviderError, match="already registered"):
        registry.register("echo", Echo)
    with pytest.raises(ProviderError, match="non-empty name"):
        registry.register(" ", Echo)


def test_a_factory_must_build_a_provider_with_its_registered_name(
    resources: ProviderResources,
) -> None:
    registry = ProviderRegistry()
    registry.register("other", Echo)
    registry.register("junk", lambda res: object())  # type: ignore[arg-type,return-value]
    with pytest.raises(ProviderError, match="registered as 'other' calls itself 'echo'"):
        registry.create("other", resources)
    with pytest.raises(ProviderError, match="built a object, not a MemoryProvider"):
        registry.create("junk", resources)


def test_history_is_built_in_and_needs_the_session_store(resources: ProviderResources) -> None:
    registry = default_registry()
    assert registry.is_builtin("history")
    with pytest.raises(ProviderError, match="needs the session store"):
        registry.create("history", resources)


def test_selection_by_config_name(resources: ProviderResources) -> None:
    registry = ProviderRegistry()
    registry.register("echo", Echo)
    registry.register("builtin_echo", lambda res: _named("builtin_echo"), builtin=True)
    builtins, external = registry.create_selected(
        resources, builtins=["builtin_echo"], external="echo"
    )
    assert [p.name for p in builtins] == ["builtin_echo"]
    assert isinstance(external, Echo)
    assert registry.create_selected(resources, builtins=[], external=None) == ([], None)
    with pytest.raises(ProviderError, match="'builtin_echo' is built in"):
        registry.create_selected(resources, builtins=[], external="builtin_echo")
    with pytest.raises(ProviderError, match="'echo' is not a built-in"):
        registry.create_selected(resources, builtins=["echo"], external=None)
    with pytest.raises(ProviderError, match="unknown memory provider 'nope'"):
        registry.create_selected(resources, builtins=[], external="nope")


def _named(name: str) -> MemoryProvider:
    provider = MemoryProvider()
    provider.name = name  # type: ignore[misc]
    return provider


def _entry_point(name: str, value: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


def test_entry_points_are_registered_and_imported_only_when_created(
    resources: ProviderResources,
) -> None:
    registry = default_registry()
    here = __name__
    added = registry.load_entry_points(
        [
            _entry_point("echo", f"{here}:make_echo"),
            _entry_point("broken", "no_such_module_for_mnemo_tests:factory"),
            _entry_point("not_callable", f"{here}:NOT_A_FACTORY"),
            _entry_point("history", f"{here}:make_echo"),  # may not replace a built-in
        ]
    )
    assert added == ["echo", "broken", "not_callable"]
    assert isinstance(registry.create("echo", resources), Echo)
    with pytest.raises(ProviderError, match=r"plugin 'broken' .* could not be loaded"):
        registry.create("broken", resources)
    with pytest.raises(ProviderError, match=r"'not_callable' .* is not a factory"):
        registry.create("not_callable", resources)
    assert registry.is_builtin("history")


def test_installed_plugins_are_discovered_from_package_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resources: ProviderResources
) -> None:
    """A real distribution on sys.path, found by importlib.metadata like any install."""
    site = tmp_path / "site"
    (site / "mnemo_echo_plugin").mkdir(parents=True)
    (site / "mnemo_echo_plugin" / "__init__.py").write_text(
        "from memory_core.providers.base import MemoryProvider\n"
        "class Plugged(MemoryProvider):\n"
        "    name = 'plugged'\n"
        "    async def prefetch(self, query):\n"
        "        return 'plugged: ' + query\n"
        "def factory(resources):\n"
        "    return Plugged()\n"
    )
    dist = site / "mnemo_echo_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mnemo-echo-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nplugged = mnemo_echo_plugin:factory\n"
    )
    monkeypatch.syspath_prepend(str(site))
    registry = default_registry()
    assert "plugged" not in registry.names()  # nothing is discovered until asked
    assert "plugged" in registry.load_entry_points()
    assert "mnemo_echo_plugin" not in sys.modules  # imported only when created
    provider = registry.create("plugged", resources)
    assert provider.name == "plugged"
    sys.modules.pop("mnemo_echo_plugin", None)

"""What the end-to-end tests of the real `mnemo run` against the fakes share.

`fakes_fixture` and `served_fixture` make a module's `fakes` and `served` fixtures (the
fakes serving in a thread of their own, one `mnemo run` against them, stopped cleanly at
the end); the `*_section` functions write the parts of a `mnemo.yaml` pointed at the fakes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import pytest

from tests.gateway.processes import FakesThread

F = TypeVar("F", bound=FakesThread)
Scope = Literal["session", "package", "module", "class", "function"]


class Stoppable(Protocol):
    def stop(self, timeout: float = 30.0) -> tuple[int, str]: ...


M = TypeVar("M", bound=Stoppable)

WAITING = "waits for your approval"
"""In the notice of a staged memory change (and nowhere else)."""
NOTHING_WAITING = "No memory changes are waiting"
"""`/memory pending`'s answer when nothing is staged."""


def fakes_fixture(make: Callable[[], F], scope: Scope = "module") -> Any:
    """A `fakes` fixture: `make()` for the `scope`, closed once it is over."""

    @pytest.fixture(scope=scope)
    def fakes() -> Iterator[F]:
        world = make()
        try:
            yield world
        finally:
            world.close()

    return fakes


@contextlib.contextmanager
def stopped_cleanly(
    mnemo: M, logged: Sequence[str] = (), never_logged: Sequence[str] = ()
) -> Iterator[M]:
    """`mnemo` for the block, then stopped: it exits 0, its stderr holding each of `logged`
    and none of `never_logged` (the logs never carry what people or the model wrote)."""
    try:
        yield mnemo
    finally:
        code, err = mnemo.stop()
    assert code == 0, err
    for line in logged:
        assert line in err, f"{line!r} not in:\n{err}"
    for said in never_logged:
        assert said not in err, f"{said!r} in:\n{err}"


def served_fixture(
    start: Callable[[Any, Path], M],
    name: str,
    *,
    ready: Callable[[Any, M], object] | None = None,
    logged: Sequence[str] = (),
    never_logged: Sequence[str] = (),
) -> Any:
    """A module's `served` fixture: `start(fakes, workdir)` in a fresh `name` folder, then
    `ready(fakes, mnemo)` if given; stopped as `stopped_cleanly` says once the module is over."""

    @pytest.fixture(scope="module")
    def served(fakes: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[M]:
        with stopped_cleanly(
            start(fakes, tmp_path_factory.mktemp(name)), logged, never_logged
        ) as mnemo:
            if ready is not None:
                ready(fakes, mnemo)
            yield mnemo

    return served


def discord_ready(fakes: Any, mnemo: Any) -> None:
    """Waits until `mnemo run` says it serves and the fake Discord has it connected."""
    mnemo.wait_line("serving ")
    fakes.run(fakes.dc.wait_ready)


def write_config(workdir: Path, text: str) -> None:
    """`text` as the mnemo.yaml of `workdir` (made if missing)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "mnemo.yaml").write_text(text, encoding="utf-8")


def allowed(users: Iterable[int]) -> str:
    return "  allowed_users: [" + ", ".join(f'"{user}"' for user in users) + "]\n"


def telegram_section(url: str, users: Iterable[int]) -> str:
    """The `telegram:` section for the fake Bot API at `url`, allowing `users`."""
    return (
        "telegram:\n"
        f"  base_url: {url}/bot\n"
        f"  base_file_url: {url}/file/bot\n"
        f"{allowed(users)}"
        "  edit_interval: 0.05\n"
    )


def discord_section(api_base: str, gateway_url: str, users: Iterable[int]) -> str:
    """The `discord:` section for the fake Discord, allowing `users`."""
    return (
        "discord:\n"
        f"  api_base: {api_base}\n"
        f"  gateway_url: {gateway_url}\n"
        f"{allowed(users)}"
        "  edit_interval: 0.05\n"
    )


def learning_section(nudge: int, creation_nudge: int, write_approval: str | None = None) -> str:
    """The `memory:` and `skills:` sections: a review after every `nudge` turns, a skill
    nudge after every `creation_nudge`, and `write_approval` (YAML, as written) if given."""
    approval = "" if write_approval is None else f"  write_approval: {write_approval}\n"
    return (
        f"memory:\n  nudge_interval: {nudge}\n{approval}"
        f"skills:\n  creation_nudge_interval: {creation_nudge}\n"
    )

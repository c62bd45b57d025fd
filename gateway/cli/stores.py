"""The configured stores, opened for one command, on whichever backend the config names.

`open_stores(config)` opens every store through `memory_core.open_storage`
(SQLite and files under home, or PostgreSQL when ``storage.url`` is set) on an
event loop of its own, and closes them when the block ends, however it ends.
A command's body stays plain synchronous code: it calls the memory and skills
stores (synchronous on both backends) directly and runs the session store's
coroutines with `OpenStores.run`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from gateway.config import Config, storage_settings
from memory_core import Storage, open_storage

T = TypeVar("T")

STATE_DB = "state.db"  # the SQLite backend's session file, named in its messages


@dataclass(frozen=True)
class OpenStores:
    """The open stores of one command, and the loop their async calls run on."""

    storage: Storage
    _runner: asyncio.Runner

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of the stores (a session store call) to its end."""
        return self._runner.run(work)


@contextmanager
def open_stores(config: Config) -> Iterator[OpenStores]:
    """Every store `config` names, open for the block (created or migrated as the bot
    would), closed after it."""
    with asyncio.Runner() as runner:
        opened = open_storage(storage_settings(config))
        storage = runner.run(opened.__aenter__())
        try:
            yield OpenStores(storage, runner)
        except BaseException as exc:
            if not runner.run(opened.__aexit__(type(exc), exc, exc.__traceback__)):
                raise
        else:
            runner.run(opened.__aexit__(None, None, None))


def missing_history(config: Config) -> Path | None:
    """The SQLite session file when the backend is SQLite and it does not exist yet
    (a command that only reads history must not create it), else None."""
    path = config.home / STATE_DB
    if config.storage.url is None and not path.exists():
        return path
    return None

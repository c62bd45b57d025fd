"""A small least-recently-used mapping: the skills store's per-person caches.

The store keeps, per person, a folder reader and a rendered view; with
thousands of people seen over a run those would only grow. `LruCache` keeps
the `size` most recently used entries and drops the oldest beyond them (a
dropped person's folder is simply read again at their next turn).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """At most `size` entries; `get` and `put` make an entry the most recent."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("an LRU cache holds at least one entry")
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The entry of `key`, or None."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Keep `value` under `key`, dropping the least recently used beyond `size`."""
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)

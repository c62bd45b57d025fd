"""The skills store's bounded per-person cache."""

from __future__ import annotations

import pytest

from memory_core.skills.cache import LruCache


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: LruCache[str, int] = LruCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    assert len(cache) == 2


def test_putting_a_key_again_replaces_it_without_growing() -> None:
    cache: LruCache[str, int] = LruCache(2)
    for value in range(5):
        cache.put("a", value)
    assert cache.get("a") == 4 and len(cache) == 1


def test_a_cache_holds_at_least_one_entry() -> None:
    with pytest.raises(ValueError, match="at least one"):
        LruCache[str, int](0)

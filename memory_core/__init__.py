"""Mnemo's memory library: file memory, session store and search, providers,
context wrapping and scrubbing, the safety scan, and the skills store.

It is usable without the gateway and imports nothing from it.
"""

from memory_core.errors import MemoryCoreError

__all__ = ["MemoryCoreError"]

"""Errors of the memory_core package.

MemoryCoreError
 └── (each module adds its own subclasses here as it is built)
"""


class MemoryCoreError(Exception):
    """Root of every error raised by memory_core."""

"""The memory stores of both backends, for the tests of this folder that take either."""

from tests.memory_core.pg.memory_backends import memory_backend

__all__ = ["memory_backend"]

"""Mnemo gateway: the application layer (adapters, agent loop, commands, CLI)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mnemo-gateway")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]

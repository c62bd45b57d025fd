"""Errors of the gateway package.

GatewayError
 ├── ConfigError          configuration file or environment is invalid
 └── NotAvailableError    a command whose feature is not built yet
"""


class GatewayError(Exception):
    """Root of every error raised by the gateway package."""


class ConfigError(GatewayError):
    """The configuration is invalid; the message names the key and the problem."""


class NotAvailableError(GatewayError):
    """A command was asked for a feature this build does not have yet."""

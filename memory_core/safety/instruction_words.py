"""The reasons `instruction_reasons` gives, as the person reads them."""

from __future__ import annotations

LINK = "it contains a link"
EMAIL = "it contains an e-mail address"
CODE = "it contains a shell command or code"
ORDER = "it gives the assistant an order"

"""The bot's own lines in the person's language: message catalogs and one person's locale.

Every line the bot writes itself is an English message id in the code, marked
for extraction (`Translator._`, `Translator.n_`, `N_` for a constant read
later) and translated from a gettext catalog (`locales/<language>/LC_MESSAGES/
mnemo.po`, compiled to `.mo` when the package is built; a checkout whose `.mo`
is missing or older than its `.po` compiles it in memory). English is the
source language. Placeholders are `str.format` names (``{query}``), filled after
translation, so a translation may move them. Importing this package loads no
catalog.
"""

from gateway.i18n.catalogs import (
    DEFAULT_LANGUAGE,
    DOMAIN,
    LANGUAGE_NAMES,
    LANGUAGES,
    LOCALES_DIR,
    N_,
    Catalogs,
    Translator,
    negotiate,
)
from gateway.i18n.zones import UTC_ZONE, parse_zone, zone_name

__all__ = [
    "DEFAULT_LANGUAGE",
    "DOMAIN",
    "LANGUAGES",
    "LANGUAGE_NAMES",
    "LOCALES_DIR",
    "N_",
    "UTC_ZONE",
    "Catalogs",
    "Translator",
    "negotiate",
    "parse_zone",
    "zone_name",
]
